"""Matrix x vector and matrix x matrix at every ISA level and thread count, against the float64
product of the gguf-dequantized weights (NMSE), against each other, and the register-blocked
1 x 4 kernels against the one-token dot products (bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest

import app.kernels as K
from tests.kernels.helpers import ALL_TYPES, LEVELS, MATMUL_NMSE, name, oracle_dequant


def _nmse(y: np.ndarray, want: np.ndarray) -> float:
    return float(np.mean((y - want) ** 2) / max(np.mean(want**2), 1e-30))


@pytest.fixture(scope="module")
def pools():
    with K.ThreadPool(1) as p1, K.ThreadPool(2) as p2:
        yield {1: p1, 2: p2}


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("t", ALL_TYPES, ids=name)
def test_matvec_and_matmul(t, isa, pools):
    n_cols = 2 * max(K.block_size(t), 128)
    n_rows, n_tok = 37, 11  # odd: chunks and token blocks do not divide them
    w = K.random_weights(t, n_rows, n_cols, seed=t)
    wf = np.stack([oracle_dequant(t, r, n_cols) for r in w])
    rng = np.random.default_rng(t)
    x = rng.standard_normal((n_tok, n_cols)).astype(np.float32)
    want = x.astype(np.float64) @ wf.T
    y1 = K.matmul(pools[1], t, w, n_cols, x, isa=isa)
    y2 = K.matmul(pools[2], t, w, n_cols, x, isa=isa)
    np.testing.assert_array_equal(y1, y2)  # each row is computed by one thread: no reordering
    assert _nmse(y1, want) < MATMUL_NMSE
    # the 1 x 4 kernels follow the one-token dot's summation order (test_bitexact.py): equal
    for i in (0, 5, n_tok - 1):
        np.testing.assert_array_equal(K.matvec(pools[2], t, w, n_cols, x[i], isa=isa), y1[i])
    np.testing.assert_array_equal(
        K.matvec(None, t, w, n_cols, x[0], isa=isa), K.matvec(pools[2], t, w, n_cols, x[0], isa=isa)
    )


def test_matvec_row_stride_and_big_matrix(pools):
    """Rows with padding between them (a view), and enough rows for many chunks."""
    t, n_cols = 3, 576
    w = K.random_weights(t, 1000, n_cols, seed=3)
    padded = np.zeros((1000, w.shape[1] + 40), np.uint8)
    padded[:, : w.shape[1]] = w
    x = np.random.default_rng(0).standard_normal(n_cols).astype(np.float32)
    np.testing.assert_array_equal(K.matvec(pools[2], t, padded, n_cols, x), K.matvec(pools[2], t, w, n_cols, x))


def test_matmul_abort(pools):
    p = pools[2]
    t, n_cols = 2, 4096
    w = K.random_weights(t, 64, n_cols)
    p.abort()
    try:
        with pytest.raises(K.KernelAborted):
            K.matvec(p, t, w, n_cols, np.ones(n_cols, np.float32))
    finally:
        p.clear_abort()
    K.matvec(p, t, w, n_cols, np.ones(n_cols, np.float32))


@pytest.mark.parametrize("isa", LEVELS)
def test_matmul_part_splits_cover_every_row(isa):
    """llk_matmul_part (for callers with their own pool) gives the same rows as llk_matmul for any
    (ith, nth) split, activations quantized by the caller."""
    t, n_cols, n_rows, n_tok = 12, 512, 45, 6
    w = K.random_weights(t, n_rows, n_cols, seed=1)
    x = np.random.default_rng(1).standard_normal((n_tok, n_cols)).astype(np.float32)
    want = K.matmul(None, t, w, n_cols, x, isa=isa)
    ab = K.act_row_bytes(t, n_cols)
    a = np.concatenate([K.quantize_activations(t, row, isa=isa) for row in x])
    for nth in (1, 2, 7):
        y = np.full((n_tok, n_rows), np.nan, np.float32)
        for ith in range(nth):
            st = K.lib.llk_matmul_part(
                K.ISA_NAMES.index(isa),
                t,
                K.ffi.from_buffer(w),
                w.strides[0],
                n_rows,
                n_cols,
                K.ffi.from_buffer(a),
                n_tok,
                K.ffi.from_buffer("float[]", y),
                n_rows,
                ith,
                nth,
            )
            assert st == 0
        np.testing.assert_array_equal(y, want)
    assert a.nbytes == n_tok * ab
    bad = K.lib.llk_matmul_part(
        0,
        t,
        K.ffi.from_buffer(w),
        w.strides[0],
        n_rows,
        n_cols,
        K.ffi.from_buffer(a),
        n_tok,
        K.ffi.from_buffer("float[]", y),
        n_rows,
        3,
        3,
    )
    assert bad != 0
