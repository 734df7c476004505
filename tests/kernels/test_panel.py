"""Packed weights (panels of 8 rows, kernels/llk_panel.c): the panel kernels give the floats of the
reference row-by-row product bit for bit, at every level that has them, for every token count a
register tile can leave over, partial lane groups, odd panel counts and both thread counts."""

from __future__ import annotations

import numpy as np
import pytest

import app.kernels as K
from app.errors import KernelError
from tests.kernels.helpers import LEVELS, name

PACKED_TYPES = [2, 3, 6, 7, 8, 12, 13, 14, 23]  # Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS
# (n_rows, n_cols): one block; a partial last group of 8 blocks (576 = 18 blocks, SmolLM2's width);
# whole groups; several panels that threads split (the K-quants take whole super-blocks of 256;
# 33 of them are more than one range of the AVX2 kernels' unpacked levels, which hold 15 to 26;
# 13 more than one range of the 512-bit two-panel tiles', which hold 11; 152 rows, 19 panels, two
# of a prompt's chunks of 8 (the 512-bit tiles' groups of 4 pairs) and one of 3; 2400 = 75 blocks, more
# than one range of the AVX2 legacy tiles, which take 64 blocks at a time, and a partial last one;
# 4800 = 150 blocks, more than one range of the 512-bit two-panel legacy tiles, which take 128, a
# partial last range and round, and an odd panel after the pair)
SHAPES = [(8, 32), (16, 576), (24, 256), (40, 1536), (8, 2400), (24, 4800)]
K_SHAPES = [(8, 256), (16, 512), (40, 1536), (8, 33 * 256), (16, 13 * 256), (152, 512)]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


@pytest.fixture(scope="module")
def pool2():
    with K.ThreadPool(2) as p:
        yield p


def _levels_with_panels(t: int) -> list[str]:
    return ["ref"] + [lv for lv in LEVELS[1:] if K.isa_packs(t, lv)]


@pytest.mark.parametrize(
    "t,shape",
    [(t, s) for t in PACKED_TYPES for s in (K_SHAPES if t in (12, 13, 14, 23) else SHAPES)],
    ids=lambda v: name(v) if isinstance(v, int) else f"{v[0]}x{v[1]}",
)
def test_packed_matmul_equals_reference_rows(t, shape, pool2):
    n_rows, n_cols = shape
    w = K.random_weights(t, n_rows, n_cols, seed=n_rows + n_cols)
    rng = np.random.default_rng(n_cols)
    x = rng.standard_normal((29, n_cols)).astype(np.float32) * rng.uniform(0.1, 10, (29, 1)).astype(np.float32)
    want = K.matmul(None, t, w, n_cols, x, isa="ref")
    packed = K.pack(pool2, t, w, n_cols)
    assert np.array_equal(packed, K.pack(None, t, w, n_cols))  # the threads' split changes nothing
    for isa in _levels_with_panels(t):
        # every remainder of the 4-token (256-bit, and Q4_0's four-panel 512-bit tiles: 17, 18, 23)
        # and 8-token (512-bit) tiles, with the levels unpacked once (more than two tiles) and not
        for n_tok in (1, 2, 3, 4, 5, 9, 13, 17, 18, 23, 29):
            for pool in (None, pool2):
                got = K.matmul_packed(pool, t, packed, n_rows, n_cols, x[:n_tok], isa=isa)
                assert np.array_equal(_bits(got), _bits(want[:n_tok])), (isa, n_tok, pool)


@pytest.mark.parametrize("t", [2, 3, 8], ids=name)
def test_prompt_passes_over_blocks_of_panels_and_chunks_of_tokens(t):
    """A prompt takes a legacy type's panels in blocks of about 256 KB (each block met by every token
    tile before the next), and with VNNI Q8_0's biased activations in chunks of at most 4 MB: 23
    panels of 4800 columns are three blocks or more and an odd last panel; 650 tokens of 4800 columns
    are two chunks. The floats stay the reference's."""
    rng = np.random.default_rng(t)
    for (n_rows, n_cols), n_tok in (((184, 4800), 37), ((16, 4800), 650)):
        w = K.random_weights(t, n_rows, n_cols, seed=n_rows + n_cols)
        x = rng.standard_normal((n_tok, n_cols)).astype(np.float32)
        want = K.matmul(None, t, w, n_cols, x, isa="ref")
        packed = K.pack(None, t, w, n_cols)
        for isa in _levels_with_panels(t)[1:]:
            got = K.matmul_packed(None, t, packed, n_rows, n_cols, x, isa=isa)
            assert np.array_equal(_bits(got), _bits(want)), (isa, n_rows, n_tok)


@pytest.mark.parametrize("t", PACKED_TYPES, ids=name)
def test_levels_pack_the_types_they_have_kernels_for(t):
    """The reference level never packs; AVX2 and AVX-512 pack these types wherever the CPU has them."""
    assert not K.isa_packs(t, "ref")
    for lv in LEVELS[1:]:
        assert K.isa_packs(t, lv)


def test_pack_refuses_what_has_no_layout():
    w = K.random_weights(2, 12, 64, seed=1)
    with pytest.raises(KernelError):
        K.pack(None, 2, w, 64)  # 12 rows: not whole panels
    with pytest.raises(KernelError):
        K.pack(None, 10, K.random_weights(10, 8, 256, seed=1), 256)  # Q2_K: no panel layout yet
