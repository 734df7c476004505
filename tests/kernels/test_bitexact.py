"""Every ISA level computes the same floats, bit for bit (the kernels' summation contract).

A model's greedy continuation is chaotic: one rounding difference in one logit can flip a near-tie
and change every token after it. So the SIMD kernels do not merely agree with their reference twin
within a tolerance: each follows the same float operations in the same order as llk_ref.c, and
only the exact integer parts (sums of level x activation products) are free to be computed in any
order. The contract of each kernel family is written where its reference is (llk_ref.c,
llk_ref_iq.c); these tests hold every level, and the 1 x 4 matmul kernels, to it.
"""

from __future__ import annotations

import numpy as np
import pytest

import app.kernels as K
from tests.kernels.helpers import ALL_TYPES, GGUF_QUANTIZABLE, SIMD_LEVELS, name, unaligned
from tests.kernels.test_ops import ATTNS, LONG_ATTNS


def bits(v) -> np.ndarray:
    return np.asarray(v, np.float32).view(np.uint32)


def assert_same_bits(got, want, what):
    g, w = bits(got), bits(want)
    if not np.array_equal(g, w):
        i = int(np.flatnonzero(g.reshape(-1) != w.reshape(-1))[0])
        raise AssertionError(
            f"{what}: element {i}: {np.asarray(got).reshape(-1)[i]!r} != "
            f"{np.asarray(want).reshape(-1)[i]!r} (reference)"
        )


def _lengths(t: int) -> list[int]:
    bs = K.block_size(t)
    if bs == 1:  # every tail shape of the 8-, 16- and 32-float steps
        return [1, 5, 8, 15, 16, 17, 24, 31, 32, 33, 40, 47, 63, 64, 100, 576, 1000]
    if bs == 32:  # whole and partial groups of 8 blocks, pairs and odd blocks
        return [32 * k for k in (1, 2, 3, 6, 7, 8, 9, 16, 17, 18, 24, 33)]
    return [256 * k for k in (1, 2, 3, 5)]


def _rows(t: int, n: int, n_rows: int, seed: int) -> np.ndarray:
    if t in GGUF_QUANTIZABLE and t not in (0, 1, 30):
        from gguf import GGMLQuantizationType as T
        from gguf.quants import quantize

        w = np.random.default_rng(seed).standard_normal((n_rows, n)).astype(np.float32)
        return quantize(w, T(t)).reshape(n_rows, -1)
    return K.random_weights(t, n_rows, n, seed=seed)


def _activations(n: int, rng) -> list[np.ndarray]:
    x = rng.standard_normal(n).astype(np.float32)
    wide = (rng.standard_normal(n) * np.exp(rng.uniform(-6, 6, n))).astype(np.float32)
    return [x, wide, np.abs(x) * 3]


@pytest.mark.parametrize("isa", SIMD_LEVELS)
@pytest.mark.parametrize("t", ALL_TYPES, ids=name)
def test_dot_is_bit_identical_to_reference(t, isa):
    rng = np.random.default_rng(1000 + t)
    for n in _lengths(t):
        rows = _rows(t, n, 3, seed=n + t)
        for x in _activations(n, rng):
            a = K.quantize_activations(t, x, isa="ref")
            for off, row in enumerate(rows):
                want = K.vec_dot(t, row, a, n, isa="ref")
                got = K.vec_dot(t, unaligned(row, off + 1), unaligned(a, 4 * off + 4), n, isa=isa)
                assert_same_bits(got, want, f"{name(t)} n={n} row {off}")


@pytest.fixture(scope="module")
def pool():
    with K.ThreadPool(2) as p:
        yield p


@pytest.mark.parametrize("isa", ["ref"] + SIMD_LEVELS)
@pytest.mark.parametrize("t", ALL_TYPES, ids=name)
def test_matmul_rows_equal_matvec_and_reference(t, isa, pool):
    """Prompt batches (the 1 x 4 kernels) give each token exactly its one-token product."""
    n_cols = (
        9 * K.block_size(t)
        if K.block_size(t) == 32
        else 2 * max(K.block_size(t), 128) + (40 if K.block_size(t) == 1 else 0)
    )
    n_rows, n_tok = 13, 9
    w = _rows(t, n_cols, n_rows, seed=t)
    x = np.random.default_rng(t).standard_normal((n_tok, n_cols)).astype(np.float32)
    y = K.matmul(pool, t, w, n_cols, x, isa=isa)
    want = K.matmul(pool, t, w, n_cols, x, isa="ref")
    for i in range(n_tok):
        assert_same_bits(y[i], K.matvec(pool, t, w, n_cols, x[i], isa=isa), f"{name(t)} token {i}")
    assert_same_bits(y, want, f"{name(t)} vs reference")


@pytest.mark.parametrize("isa", SIMD_LEVELS)
@pytest.mark.parametrize("kv_dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    "cfg", ATTNS + LONG_ATTNS[:3], ids=lambda c: f"h{c.n_head}-kv{c.n_head_kv}-d{c.head_dim}-w{c.window}"
)
def test_attention_is_bit_identical_to_reference(cfg, kv_dtype, isa, pool):
    rng = np.random.default_rng(cfg.head_dim)
    for n_kv, pos in ((23, [0, 3, 10, 17, 21, 22]), (700, [699])):  # batch; one long split token
        q = rng.standard_normal((len(pos), cfg.n_head, cfg.head_dim)).astype(np.float32)
        k = (rng.standard_normal((n_kv, cfg.n_head_kv, cfg.head_dim)) * 2).astype(kv_dtype)
        v = rng.standard_normal((n_kv, cfg.n_head_kv, cfg.head_dim)).astype(kv_dtype)
        p = np.array(pos, np.int32)
        for threads in (pool, None):
            assert_same_bits(
                K.attention(threads, cfg, q, k, v, p, isa=isa),
                K.attention(threads, cfg, q, k, v, p, isa="ref"),
                f"n_kv={n_kv}",
            )


def _prompt_attention_cases():
    # groups of 9: the tiled walk takes up to 8 query heads of a KV head per item, then the rest
    for cfg in ATTNS + [K.AttentionConfig(18, 2, 64)]:
        for kind in ("f32", "f16", "q8_0"):
            if kind != "q8_0" or cfg.head_dim % 32 == 0:
                yield pytest.param(
                    cfg, kind, id=f"h{cfg.n_head}-kv{cfg.n_head_kv}-d{cfg.head_dim}-w{cfg.window}-{kind}"
                )


def _attention_inputs(cfg, kind, n_kv, n_tok, rng):
    """Queries and K/V caches of the cache kind (f32, f16 or q8_0 rows) for the prompt tests."""
    shape = (n_kv, cfg.n_head_kv, cfg.head_dim)
    k = (rng.standard_normal(shape) * 2).astype(np.float32)
    v = rng.standard_normal(shape).astype(np.float32)
    if kind == "q8_0":
        k, v = (K.quantize_kv_q8_0(x.reshape(n_kv, -1)) for x in (k, v))
    elif kind == "f16":
        k, v = k.astype(np.float16), v.astype(np.float16)
    q = rng.standard_normal((n_tok, cfg.n_head, cfg.head_dim)).astype(np.float32)
    return q, k, v


@pytest.mark.parametrize("isa", ["ref"] + SIMD_LEVELS)
@pytest.mark.parametrize("cfg,kind", list(_prompt_attention_cases()))
def test_prompt_attention_gives_each_token_its_own_attention(cfg, kind, isa, pool):
    """A prompt batch walks the cache in tiles of positions that a block of tokens shares (each
    converted to float32 once); every token still gets, bit for bit, what it gets alone, and what
    the reference gives. Positions cross tile edges, blocks end part-way, and a window starts
    inside a tile."""
    rng = np.random.default_rng(cfg.head_dim + 7 * cfg.n_head)
    n_kv = 333  # fewer than a split needs, so one token alone reads the cache the direct way
    pos = np.array([0, 1, 62, 63, 64, 65, 127, 128, 129, 200, 255, 256, 300, 331, 332], np.int32)
    q, k, v = _attention_inputs(cfg, kind, n_kv, len(pos), rng)
    got = K.attention(pool, cfg, q, k, v, pos, isa=isa)
    for t in range(len(pos)):
        assert_same_bits(got[t], K.attention(None, cfg, q[t : t + 1], k, v, pos[t : t + 1], isa=isa)[0], f"token {t}")
    assert_same_bits(got, K.attention(None, cfg, q, k, v, pos, isa="ref"), "batch")


@pytest.mark.parametrize("isa", ["ref"] + SIMD_LEVELS)
@pytest.mark.parametrize("kind", ["f32", "f16"])
@pytest.mark.parametrize(
    "cfg,n_tok,edge",
    [
        (K.AttentionConfig(8, 2, 64), 70, 32),  # groups of 4: blocks of 32 tokens
        (K.AttentionConfig(6, 3, 48), 100, 64),  # groups of 2: blocks of 64
        (K.AttentionConfig(4, 4, 32), 140, 128),  # multi-head: blocks of 128
    ],
    ids=["group4", "group2", "mha"],
)
def test_a_long_prompt_in_large_token_blocks_gives_each_token_its_own_attention(cfg, n_tok, edge, kind, isa, pool):
    """Enough tokens for the largest blocks (with one thread 32 tokens share each tile when a KV
    head has 4 or more query heads, 64 with 2, 128 with 1; with two threads smaller blocks where
    both would be short of items), the last block partial, over a cache that ends part-way through
    a tile: bit for bit what each token gets alone and what the reference gives."""
    rng = np.random.default_rng(71)
    n_kv = n_tok + 80
    pos = np.arange(n_kv - n_tok, n_kv, dtype=np.int32)
    q, k, v = _attention_inputs(cfg, kind, n_kv, n_tok, rng)
    want = K.attention(None, cfg, q, k, v, pos, isa="ref")
    for threads in (None, pool):
        got = K.attention(threads, cfg, q, k, v, pos, isa=isa)
        assert_same_bits(got, want, f"batch, pool {threads is not None}")
        for t in (0, edge - 1, edge, n_tok - 1):
            assert_same_bits(
                got[t], K.attention(None, cfg, q[t : t + 1], k, v, pos[t : t + 1], isa=isa)[0], f"token {t}"
            )


@pytest.mark.parametrize("isa", ["ref"] + SIMD_LEVELS)
@pytest.mark.parametrize("cfg,kind", list(_prompt_attention_cases()))
def test_a_blocked_cache_gives_the_same_attention(cfg, kind, isa, pool):
    """The decoder's cache holds its positions in blocks, head after head in each; the attention
    walks it in runs that end at the blocks' edges. Blocks of 48 (inside a tile and across its
    edges) and 256, the last one partial, give bit for bit what the position-major cache gives:
    a prompt, one token over a long cache (in splits), and one over a short one (no split)."""
    rng = np.random.default_rng(cfg.head_dim + 5 * cfg.n_head)
    n_kv = 700
    pos = np.array([0, 47, 48, 63, 64, 95, 200, 255, 256, 300, 333, 511, 512, 600, 699], np.int32)
    q, k, v = _attention_inputs(cfg, kind, n_kv, len(pos), rng)
    want = K.attention(pool, cfg, q, k, v, pos, isa=isa)
    for block in (48, 256):
        assert_same_bits(K.attention(pool, cfg, q, k, v, pos, isa=isa, kv_block=block), want, f"block {block}")
        pre = tuple(K.kv_blocked(x, cfg.n_head_kv, block) for x in (k, v))  # arranged once, as the decoder holds them
        assert_same_bits(K.attention(pool, cfg, q, k, v, pos, isa=isa, kv_block=block, blocked=pre), want, "arranged")
        for t in (0, 9, 14):  # one token over a 700 cache: in splits, merged (the same either way)
            one = [K.attention(pool, cfg, q[t : t + 1], k, v, pos[t : t + 1], isa=isa, kv_block=b) for b in (0, block)]
            assert_same_bits(one[1], one[0], f"block {block}, token {t}")
        short = [
            K.attention(pool, cfg, q[:1], k[:300], v[:300], pos[:1] + 299, isa=isa, kv_block=b) for b in (0, block)
        ]
        assert_same_bits(short[1], short[0], f"block {block}, one token over 300 positions, no split")
