"""The Q8_0 KV cache in attention: the kernels read the 8-bit blocks directly, and since each value
d * q is exact in float32, attention over a Q8_0 cache must equal, bit for bit, attention over a
float32 cache holding the dequantized values, at every ISA level (the summation contract), and
every level must equal the reference."""

from __future__ import annotations

import numpy as np
import pytest

import app.kernels as K
from tests.kernels.helpers import SIMD_LEVELS
from tests.kernels.test_bitexact import assert_same_bits
from tests.kernels.test_ops import attn_ref

Q8_ATTNS = [
    K.AttentionConfig(4, 4, 32),
    K.AttentionConfig(9, 3, 64),  # SmolLM2's GQA
    K.AttentionConfig(14, 2, 64),  # groups of 7: two subgroups
    K.AttentionConfig(4, 2, 96),  # 96: a 16-value tail at 512 bits
    K.AttentionConfig(4, 1, 256, softcap=30.0),  # Gemma 3's head size, soft-capped
    K.AttentionConfig(4, 2, 32, window=5),  # sliding window
]
IDS = [f"h{c.n_head}-kv{c.n_head_kv}-d{c.head_dim}-w{c.window}" for c in Q8_ATTNS]


def _caches(cfg, n_kv, rng):
    k = (rng.standard_normal((n_kv, cfg.n_head_kv * cfg.head_dim)) * 2).astype(np.float32)
    v = rng.standard_normal((n_kv, cfg.n_head_kv * cfg.head_dim)).astype(np.float32)
    k[3, :32] = 0.0  # an all-zero block (d = 0)
    kq, vq = K.quantize_kv_q8_0(k), K.quantize_kv_q8_0(v)
    n = cfg.n_head_kv * cfg.head_dim
    shape = (n_kv, cfg.n_head_kv, cfg.head_dim)
    return kq, vq, K.dequantize_kv_q8_0(kq, n).reshape(shape), K.dequantize_kv_q8_0(vq, n).reshape(shape)


def test_quantize_kv_q8_0_matches_gguf_layout():
    """Blocks of 34 bytes: float16 d, then 32 int8; values within d/2 of the input, plus what
    rounding d to float16 costs (127 d 2^-11)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 128)).astype(np.float32) * 3
    q = K.quantize_kv_q8_0(x)
    assert q.shape == (5, 4 * 34)
    back = K.dequantize_kv_q8_0(q, 128)
    d = np.abs(x.reshape(5, 4, 32)).max(axis=2) / 127
    assert np.all(np.abs(back - x).reshape(5, 4, 32) <= d[..., None] * (0.5 + 127 * 2.0**-11))
    from gguf import GGMLQuantizationType as T
    from gguf.quants import dequantize

    np.testing.assert_array_equal(dequantize(q, T.Q8_0).reshape(5, 128), back)


@pytest.mark.parametrize("isa", ["ref"] + SIMD_LEVELS)
@pytest.mark.parametrize("cfg", Q8_ATTNS, ids=IDS)
def test_q8_attention_equals_f32_attention_of_the_same_values(cfg, isa):
    rng = np.random.default_rng(cfg.head_dim + cfg.n_head)
    with K.ThreadPool(2) as pool:
        for n_kv, pos in ((23, [0, 3, 10, 17, 21, 22]), (700, [699])):  # batch; a split token
            kq, vq, kf, vf = _caches(cfg, n_kv, rng)
            q = rng.standard_normal((len(pos), cfg.n_head, cfg.head_dim)).astype(np.float32)
            p = np.array(pos, np.int32)
            got = K.attention(pool, cfg, q, kq, vq, p, isa=isa)
            assert_same_bits(got, K.attention(pool, cfg, q, kf, vf, p, isa=isa), f"{isa} n_kv={n_kv}")
            assert_same_bits(got, K.attention(None, cfg, q, kq, vq, p, isa="ref"), f"{isa} vs ref")
            np.testing.assert_allclose(got, attn_ref(cfg, q, kf, vf, p), atol=2e-5, rtol=1e-4)


def test_q8_attention_refuses_head_sizes_off_the_block():
    cfg = K.AttentionConfig(2, 2, 16)
    q = np.zeros((1, 2, 16), np.float32)
    with pytest.raises(K.KernelError):
        K.attention(None, cfg, q, np.zeros((3, 34), np.uint8), np.zeros((3, 34), np.uint8), [0])
