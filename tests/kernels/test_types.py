"""Per-type kernels at every ISA level: dequantization against gguf.quants.dequantize, activation
quantization and dot products against the reference twin and against the exact float product.

Weights come from four places: gguf's own quantizer (legacy, float, TQ1_0, TQ2_0 and MXFP4 types),
random blocks with sane scales (every bit pattern of the level fields; the only source for the IQ1,
IQ2 and IQ3_XXS types, which llama.cpp quantizes only with an importance matrix), real rows quantized
by llama.cpp (tests/data/kernels/real_rows.npz, made by make_real_rows.py), and the SmolLM2 Q4_1
model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

import app.kernels as K
import app.kernels.bench as KB
from tests.kernels.helpers import (
    ALL_TYPES,
    DOT_REL_ERR,
    GGUF_QUANTIZABLE,
    GRID_TYPES,
    LEVELS,
    QUANT_TYPES,
    SIMD_LEVELS,
    SIMD_VS_REF_REL,
    name,
    norm_err,
    oracle_dequant,
    unaligned,
)

REAL_ROWS = Path(__file__).resolve().parents[1] / "data" / "kernels" / "real_rows.npz"


def _gguf_rows(t: int, n_rows: int, n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n_rows, n)).astype(np.float32)
    if t == 0:
        return x.view(np.uint8)
    return np.ascontiguousarray(quantize(x, T(t)))


def _real_rows():
    data = np.load(REAL_ROWS)
    for key in sorted(data.files):
        tname, tensor, n = key.split("__")
        yield int(T[tname]), int(n), data[key]


REAL = list(_real_rows())


def _lengths(t: int) -> list[int]:
    bs = K.block_size(t)
    # 8 and 17 blocks: whole activation groups of 8 (the 512-bit paths) and a partial one after;
    # 3, 6 and 18 (SmolLM2's 576 columns): a partial group of pairs, with and without an odd block
    return [bs, 3 * bs, 6 * bs, 8 * bs, 17 * bs, 18 * bs] if bs > 1 else [1, 7, 31, 33, 64, 257]


# --- dequantization -----------------------------------------------------------------------------


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("t", GGUF_QUANTIZABLE, ids=name)
def test_dequant_gguf_quantized(t, isa):
    for n in _lengths(t):
        rows = _gguf_rows(t, 3, n, seed=n)
        for off, row in enumerate(rows):
            got = K.dequantize_row(t, unaligned(row, off + 1), n, isa=isa)
            np.testing.assert_array_equal(got, oracle_dequant(t, row, n).astype(np.float32))


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("t", QUANT_TYPES, ids=name)
def test_dequant_random_blocks(t, isa):
    n = 3 * K.block_size(t)
    for off, row in enumerate(K.random_weights(t, 4, n, seed=t)):
        got = K.dequantize_row(t, unaligned(row, off), n, isa=isa)
        np.testing.assert_array_equal(got, oracle_dequant(t, row, n).astype(np.float32))


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("t,n,rows", REAL, ids=[name(r[0]) for r in REAL])
def test_dequant_real_llamacpp_rows(t, n, rows, isa):
    for row in rows:
        np.testing.assert_array_equal(
            K.dequantize_row(t, row, n, isa=isa), oracle_dequant(t, row, n).astype(np.float32)
        )


def test_real_type_coverage():
    assert {t for t, _, _ in REAL} >= {10, 11, 12, 13, 14, 20, 23, 2, 6, 7, 8, 21, 34, 35}


def test_iq_tables_header_is_current():
    """kernels/llk_iq_tables.h is what kernels/gen_iq_tables.py makes from the installed gguf."""
    import importlib.util

    kernels = Path(__file__).resolve().parents[2] / "kernels"
    spec = importlib.util.spec_from_file_location("gen_iq_tables", kernels / "gen_iq_tables.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (kernels / "llk_iq_tables.h").read_text(encoding="utf-8") == gen.render()


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("t", GRID_TYPES, ids=name)
def test_grid_types_many_blocks(t, isa):
    """64 random blocks a row: most grid entries and every scale, sign and delta pattern, against
    gguf.quants (dequantization) and the reference twin (dot)."""
    n = 64 * K.block_size(t)
    rows = K.random_weights(t, 2, n, seed=1000 + t)
    x = np.random.default_rng(t).standard_normal(n).astype(np.float32)
    a = K.quantize_activations(t, x, isa=isa)
    for row in rows:
        w = oracle_dequant(t, row, n)
        np.testing.assert_array_equal(K.dequantize_row(t, row, n, isa=isa), w.astype(np.float32))
        got = K.vec_dot(t, row, a, n, isa=isa)
        assert norm_err(got, w @ x, w, x) < DOT_REL_ERR
        assert norm_err(got, K.vec_dot(t, row, a, n, isa="ref"), w, x) < SIMD_VS_REF_REL


@pytest.fixture(scope="module")
def smollm2_q4_1_rows(smollm2_path):
    from gguf import GGUFReader

    reader = GGUFReader(str(smollm2_path))
    out = []
    for tensor in reader.tensors:
        if tensor.tensor_type == T.Q4_1 and len(tensor.shape) == 2:
            out.append((int(tensor.shape[0]), np.array(tensor.data[:4])))
        if len(out) == 3:
            break
    assert out, "no Q4_1 tensor in the SmolLM2 file"
    return out


@pytest.mark.parametrize("isa", LEVELS)
def test_real_smollm2_q4_1_rows(smollm2_q4_1_rows, isa):
    rng = np.random.default_rng(0)
    for n, rows in smollm2_q4_1_rows:
        x = rng.standard_normal(n).astype(np.float32)
        a = K.quantize_activations(3, x, isa=isa)
        for row in rows:
            want = oracle_dequant(3, row, n)
            np.testing.assert_array_equal(K.dequantize_row(3, row, n, isa=isa), want.astype(np.float32))
            assert norm_err(K.vec_dot(3, row, a, n, isa=isa), want @ x, want, x) < DOT_REL_ERR


# --- activations ------------------------------------------------------------------------------------


def _edge_vectors(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(n)
    v = [
        rng.standard_normal(n).astype(np.float32),
        np.zeros(n, np.float32),
        np.full(n, -3.5, np.float32),  # ties at the absolute max
        (rng.integers(-127, 128, n) / 127 * 2.0).astype(np.float32),  # exact .5 ties after scaling
        (rng.standard_normal(n) * 1e-40).astype(np.float32),  # subnormals
        (rng.standard_normal(n) * 1e30).astype(np.float32),
    ]  # large values
    alt = np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(np.float32) * 7.0
    alt[::5] = -7.0
    v.append(alt)
    return v


@pytest.mark.parametrize("isa", SIMD_LEVELS)
@pytest.mark.parametrize("t", [2, 12], ids=name)  # one q8_32 and one q8_256 consumer
def test_activation_quantizers_match_reference_bit_for_bit(t, isa):
    for n in (K.block_size(t) * 5, K.block_size(t)):
        for x in _edge_vectors(n):
            want = K.quantize_activations(t, x, isa="ref")
            got = K.quantize_activations(t, unaligned(x.view(np.uint8), 4).view(np.float32), isa=isa)
            np.testing.assert_array_equal(got, want)


Q8_256 = np.dtype([("d", "<f4"), ("qs", "i1", 256), ("bsums", "<i2", 16), ("gsums", "<i2", 8)])


@pytest.mark.parametrize("isa", LEVELS)
def test_q8_256_block_sums(isa):
    """A q8_256 block (llk_block_q8_256, 308 bytes) carries its level sums per 16 (bsums) and per 32
    (gsums): the kernels take them as they are, so they must be the sums of its levels."""
    assert Q8_256.itemsize == 308
    for x in _edge_vectors(256 * 3):
        a = K.quantize_activations(12, x, isa=isa).view(Q8_256)
        assert a.shape == (3,)
        q = a["qs"].astype(np.int64)
        np.testing.assert_array_equal(a["bsums"], q.reshape(3, 16, 16).sum(axis=2))
        np.testing.assert_array_equal(a["gsums"], q.reshape(3, 8, 32).sum(axis=2))


# --- dot products -------------------------------------------------------------------------------------


def _rows_for(t: int, n: int, n_rows: int, seed: int) -> np.ndarray:
    if t in GGUF_QUANTIZABLE:
        return _gguf_rows(t, n_rows, n, seed)
    return K.random_weights(t, n_rows, n, seed=seed)


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("t", ALL_TYPES, ids=name)
def test_dot_close_to_exact(t, isa):
    """The quantized product is within DOT_REL_ERR of the float product of the same weights."""
    rng = np.random.default_rng(t)
    for n in _lengths(t):
        x = rng.standard_normal(n).astype(np.float32)
        a = K.quantize_activations(t, x, isa=isa)
        for off, row in enumerate(_rows_for(t, n, 3, seed=n)):
            want = oracle_dequant(t, row, n)
            got = K.vec_dot(t, unaligned(row, off + 1), unaligned(a, 4 * off), n, isa=isa)
            assert norm_err(got, want @ x, want, x) < DOT_REL_ERR, (n, off)


@pytest.mark.parametrize("isa", SIMD_LEVELS)
@pytest.mark.parametrize("t", ALL_TYPES, ids=name)
def test_simd_dot_matches_reference(t, isa):
    rng = np.random.default_rng(100 + t)
    for n in _lengths(t):
        rows = _rows_for(t, n, 3, seed=n + 1)
        for x in _edge_vectors(n)[:3]:
            x = x + rng.standard_normal(n).astype(np.float32) * 0.1
            a_ref = K.quantize_activations(t, x, isa="ref")
            a_simd = K.quantize_activations(t, x, isa=isa)
            np.testing.assert_array_equal(a_simd, a_ref)
            for off, row in enumerate(rows):
                w = oracle_dequant(t, row, n)
                want = K.vec_dot(t, row, a_ref, n, isa="ref")
                got = K.vec_dot(t, unaligned(row, off + 3), unaligned(a_simd, 4 * off + 4), n, isa=isa)
                assert norm_err(got, want, w, x) < SIMD_VS_REF_REL, (n, off)


@pytest.mark.parametrize("isa", SIMD_LEVELS)
@pytest.mark.parametrize("t,n,rows", REAL, ids=[name(r[0]) for r in REAL])
def test_simd_dot_real_rows(t, n, rows, isa):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    a = K.quantize_activations(t, x, isa="ref")
    for row in rows:
        w = oracle_dequant(t, row, n)
        ref = K.vec_dot(t, row, a, n, isa="ref")
        assert norm_err(ref, w @ x, w, x) < DOT_REL_ERR
        assert norm_err(K.vec_dot(t, row, a, n, isa=isa), ref, w, x) < SIMD_VS_REF_REL


def _edge_blocks(t: int, n: int) -> list[np.ndarray]:
    """Rows of extreme level fields: all bits set, all clear, alternating, with various scales."""
    rb = K.row_bytes(t, n)
    out = []
    for fill in (0x00, 0xFF, 0x80, 0x7F, 0x55):
        row = np.full(rb, fill, np.uint8)
        w = K.random_weights(t, 1, n, seed=fill)[0] if t not in (0, 1, 30) else None
        if w is not None:  # keep the random rows' sane scales, extreme levels elsewhere
            mask = w != row
            row = np.where(mask, row, w)
            sane = K.random_weights(t, 1, n, seed=fill)[0]
            bb = K.lib.llk_type_block_bytes(t)
            for off in KB.SCALE_OFFSETS[t]:
                for b in range(rb // bb):
                    row[b * bb + off : b * bb + off + 2] = sane[b * bb + off : b * bb + off + 2]
        out.append(row)
    return out


@pytest.mark.parametrize("isa", SIMD_LEVELS)
@pytest.mark.parametrize("t", QUANT_TYPES, ids=name)
def test_simd_dot_edge_levels(t, isa):
    """-128 lanes (Q8_0 0x80), all-15 nibbles, all-zero levels, alternating bits."""
    n = 2 * K.block_size(t)
    x = np.random.default_rng(7).standard_normal(n).astype(np.float32) * 3
    x[0] = 9.0  # a single absolute maximum
    a = K.quantize_activations(t, x, isa="ref")
    for row in _edge_blocks(t, n):
        w = oracle_dequant(t, row, n)
        ref = K.vec_dot(t, row, a, n, isa="ref")
        assert norm_err(ref, w @ x, w, x) < DOT_REL_ERR
        assert norm_err(K.vec_dot(t, row, a, n, isa=isa), ref, w, x) < SIMD_VS_REF_REL
        np.testing.assert_array_equal(K.dequantize_row(t, row, n, isa=isa), w.astype(np.float32))


@pytest.mark.parametrize("isa", LEVELS)
def test_q8_0_minus_128_lanes(isa):
    row = np.zeros(34 * 2, np.uint8)
    row[0:2] = np.frombuffer(np.float16(0.5).tobytes(), np.uint8)
    row[2:34] = 0x80  # -128 everywhere in block 0
    row[34:36] = np.frombuffer(np.float16(-0.25).tobytes(), np.uint8)
    row[36:68] = 0x80
    x = np.linspace(-1, 1, 64).astype(np.float32)
    a = K.quantize_activations(8, x, isa=isa)
    w = oracle_dequant(8, row, 64)
    assert norm_err(K.vec_dot(8, row, a, 64, isa=isa), w @ x, w, x) < DOT_REL_ERR
