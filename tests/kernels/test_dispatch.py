"""Dispatch and type traits: levels, LLAMBDA_ISA forcing, supported types, argument checks."""

from __future__ import annotations

import os
import subprocess
import sys

import gguf
import numpy as np
import pytest

import app.kernels as K
from app.errors import KernelError
from tests.kernels.helpers import ALL_TYPES, GRID_TYPES, LEVELS, name


def test_supported_types_are_the_twenty_five():
    assert K.SUPPORTED_TYPES == frozenset(ALL_TYPES)
    assert len(ALL_TYPES) == 25


@pytest.mark.parametrize("t", GRID_TYPES, ids=name)
def test_verdict_accepts_a_model_of_the_type(t, tmp_path, monkeypatch):
    """SUPPORTED_TYPES drives the model verdict: a tiny llama whose matrices are all of type t."""
    from app.gguf import open_gguf
    from app.model.support import support_verdict
    from tests.synth import TinySpec, write_tiny_model

    add_tensor = gguf.GGUFWriter.add_tensor

    def quantized(self, tname, data, *args, **kw):
        if data.ndim == 2 and data.shape[1] % K.block_size(t) == 0:
            rows = K.random_weights(t, data.shape[0], data.shape[1], seed=len(tname))
            return add_tensor(self, tname, rows, raw_dtype=gguf.GGMLQuantizationType(t))
        return add_tensor(self, tname, data, *args, **kw)

    monkeypatch.setattr(gguf.GGUFWriter, "add_tensor", quantized)
    path = write_tiny_model(tmp_path / "m.gguf", TinySpec(n_embd=256, n_ff=512))
    f = open_gguf(path)
    try:
        assert K.TYPE_NAMES[t] in {info.type.name for info in f.tensors.values()}
        assert support_verdict(f).supported, support_verdict(f).summary()
    finally:
        f.close()


@pytest.mark.parametrize("t", ALL_TYPES)
def test_block_sizes_match_gguf(t):
    bs, bb = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(t)]
    assert K.block_size(t) == bs
    assert K.row_bytes(t, bs * 7) == bb * 7


def test_isa_name_is_a_level():
    assert K.isa_name() in ("ref", "avx2", "avx2-vnni", "avx512", "avx512-vnni")
    assert 0 <= K.isa_level() <= K.best_isa_level()


def _isa_in_child(value: str | None) -> str:
    env = dict(os.environ)
    env.pop("LLAMBDA_ISA", None)
    if value is not None:
        env["LLAMBDA_ISA"] = value
    r = subprocess.run(
        [sys.executable, "-c", "import app.kernels as k; print(k.isa_level())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize("level", LEVELS)
def test_env_forces_a_lower_level(level):
    assert int(_isa_in_child(level)) == K.ISA_NAMES.index(level)


def test_env_cannot_raise_or_break():
    best = K.best_isa_level()
    assert int(_isa_in_child("avx512")) == min(best, 2)
    assert int(_isa_in_child("bogus")) == best


def test_bad_arguments_raise_kernel_error():
    with pytest.raises(KernelError):
        K.dequantize_row(5, np.zeros(64, np.uint8), 32)  # type 5 (Q4_2) is gone
    with pytest.raises(KernelError):
        K.dequantize_row(2, np.zeros(64, np.uint8), 33)  # not a block multiple
    with pytest.raises(KernelError):
        K.dequantize_row(2, np.zeros(10, np.uint8), 32)  # too few bytes
    with pytest.raises(KernelError):
        K.vec_dot(2, np.zeros(18, np.uint8), np.zeros(8, np.uint8), 32)
    with pytest.raises(KernelError):
        K.dequantize_row(2, np.zeros(18, np.uint8), 32, isa="sse9")
    assert issubclass(K.KernelAborted, KernelError)


NOVNNI_CHECK = r"""
import os, numpy as np, app.kernels as K
want = os.environ["LLAMBDA_ISA"].split("-")[0]   # avx512-novnni -> avx512, avx2-novnni -> avx2
assert K.isa_name() == want, K.isa_name()
rng = np.random.default_rng(0)
for t in sorted(K.SUPPORTED_TYPES):   # the same floats as the reference, bit for bit
    n = 17 * K.block_size(t) if K.block_size(t) == 32 else 3 * max(K.block_size(t), 40)
    w = K.random_weights(t, 4, n, seed=t)
    x = rng.standard_normal(n).astype(np.float32)
    a = K.quantize_activations(t, x)
    for row in w:
        ref = K.vec_dot(t, row, a, n, isa="ref")
        got = K.vec_dot(t, row, a, n)
        assert np.float32(got).tobytes() == np.float32(ref).tobytes(), (t, got, ref)
packed = []
for t in sorted(K.SUPPORTED_TYPES):   # the packed panels too: 5 panels (two-panel tiles and an odd one)
    if not K.isa_packs(t):
        continue
    packed.append(t)
    n = 2 * max(K.block_size(t), 256)
    w = K.random_weights(t, 40, n, seed=t)
    x = rng.standard_normal((11, n)).astype(np.float32)
    want = K.matmul(None, t, w, n, x, isa="ref")
    for n_tok in (1, 3, 11):
        got = K.matmul_packed(None, t, K.pack(None, t, w, n), 40, n, x[:n_tok])
        assert got.tobytes() == want[:n_tok].tobytes(), (t, n_tok)
assert len(packed) >= 6, packed   # the legacy 4- and 8-bit types, the K-quants and IQ4_XS pack here
print("ok")
"""


def _has_vnni_build(level: int) -> bool:
    return K.best_isa_level() >= level and "vnni" in K.isa_name(level)


@pytest.mark.parametrize(
    "isa",
    [
        pytest.param(
            "avx2-novnni",
            marks=pytest.mark.skipif(
                not _has_vnni_build(1), reason="needs an AVX-VNNI CPU to compare the two AVX2 builds"
            ),
        ),
        pytest.param(
            "avx512-novnni",
            marks=pytest.mark.skipif(
                not _has_vnni_build(2), reason="needs an AVX-512 VNNI CPU to compare the two AVX-512 builds"
            ),
        ),
    ],
)
def test_level_without_vnni_matches_reference(isa):
    env = dict(os.environ, LLAMBDA_ISA=isa)
    r = subprocess.run([sys.executable, "-c", NOVNNI_CHECK], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
