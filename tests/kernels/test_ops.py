"""Decoder operations against numpy in float64: norms, activations, element-wise, RoPE (normal,
NeoX, partial, linear / YaRN / Llama-3 scaling) and attention (GQA, causal, sliding window,
soft-capping, f16 and f32 caches)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import app.kernels as K
from tests.kernels.helpers import ATTN_ATOL, FLOAT_OP_RTOL, LEVELS

RNG = np.random.default_rng(1234)


def close(got, want, rtol=FLOAT_OP_RTOL, atol=1e-6):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("n", [1, 7, 576, 1001])
def test_norms(n):
    x = RNG.standard_normal((3, n)).astype(np.float32) * 3
    w = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    xd = x.astype(np.float64)
    rms = xd / np.sqrt((xd**2).mean(-1, keepdims=True) + 1e-5)
    close(K.rms_norm(x, w, eps=1e-5), rms * w)
    close(K.rms_norm(x, eps=1e-5), rms)
    mu = xd.mean(-1, keepdims=True)
    ln = (xd - mu) / np.sqrt(((xd - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    close(K.layer_norm(x, w, b, eps=1e-5), ln * w + b, atol=1e-5)
    close(K.layer_norm(x, eps=1e-5), ln, atol=1e-5)


def test_softmax_and_masked_rows():
    x = RNG.standard_normal((4, 33)).astype(np.float32) * 10
    x[1, :5] = -np.inf
    x[2, :] = -np.inf
    xd = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(xd - xd.max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
    want[2] = 0
    close(K.softmax(x), np.nan_to_num(want))


def test_activations():
    x = np.concatenate([RNG.standard_normal(1000) * 4, [0.0, -80.0, 80.0]]).astype(np.float32)
    u = RNG.standard_normal(x.size).astype(np.float32)
    xd = x.astype(np.float64)
    silu = xd / (1 + np.exp(-xd))
    gelu = 0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) * (xd + 0.044715 * xd**3)))
    gelu_erf = 0.5 * xd * (1 + np.vectorize(math.erf)(xd / math.sqrt(2)))
    close(K.silu(x), silu)
    close(K.gelu(x), gelu)
    close(K.gelu_erf(x), gelu_erf)
    close(K.swiglu(x, u), silu * u)
    close(K.geglu(x, u), gelu * u)
    close(K.add(x, u), xd + u)
    close(K.mul(x, u), xd * u)


@pytest.mark.parametrize("isa", LEVELS)
def test_gated_activations_levels_bit_for_bit(isa):
    """The SIMD SwiGLU and GeGLU are the reference's float for float: lanes and tails, both signs,
    the ends of the exponential's range, zeros, infinities and NaN; and close to float64."""
    g = np.concatenate(
        [RNG.standard_normal(1003) * 6, [0.0, -0.0, 87.0, -87.0, 88.5, -88.5, 1e4, -1e4, np.inf, -np.inf, np.nan]]
    ).astype(np.float32)
    u = RNG.standard_normal(g.size).astype(np.float32)
    for fn in (K.swiglu, K.geglu):
        for n in (g.size, 8, 5):
            np.testing.assert_array_equal(fn(g[:n], u[:n], isa=isa), fn(g[:n], u[:n], isa="ref"))
    gd, ud = g[:1003].astype(np.float64), u[:1003]
    close(K.swiglu(g[:1003], ud, isa=isa), gd / (1 + np.exp(-gd)) * ud)
    gelu = 0.5 * gd * (1 + np.tanh(math.sqrt(2 / math.pi) * (gd + 0.044715 * gd**3)))
    close(K.geglu(g[:1003], ud, isa=isa), gelu * ud)


@pytest.mark.parametrize("isa", LEVELS)
def test_softcap_levels_bit_for_bit(isa):
    """Soft-capped logits (Gemma 2): every level is the reference's float for float (16- and 8-lane
    steps and tails, both signs, zeros, tiny and huge values, infinities; a NaN stays NaN and is not
    the largest), and within a few 1e-8 of cap * tanh in float64."""
    x = np.concatenate(
        [
            RNG.standard_normal(1003) * 40,
            [0.0, -0.0, 1e-30, -1e-30, 1e-4, -1e-4, 3e3, -3e3, 1e30, -1e30, np.inf, -np.inf, np.nan, 7.0],
        ]
    ).astype(np.float32)
    for cap, scale in ((50.0, 0.125), (30.0, 1.0)):
        for n in (x.size, 1003, 16, 13, 8, 5, 1):
            got, mx = K.softcap(x[-n:], cap, scale, isa=isa)
            want, wmx = K.softcap(x[-n:], cap, scale, isa="ref")
            np.testing.assert_array_equal(got, want)
            assert mx == wmx == np.nanmax(want)
        y, _ = K.softcap(x, cap, scale, isa=isa)
        xd = x.astype(np.float64) * scale
        ok = ~np.isnan(xd)
        np.testing.assert_allclose(y[ok], cap * np.tanh(xd[ok] / cap), rtol=1e-6, atol=cap * 6e-8)
        assert np.isnan(y[~ok]).all() and np.signbit(y[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()
    assert K.softcap([], 30.0)[1] == -np.inf
    with pytest.raises(K.KernelError):
        K.softcap([1.0], 0.0)


# --- RoPE -------------------------------------------------------------------------------------------


def rope_ref(cfg: K.RopeConfig, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """numpy float64 RoPE: theta_i = pos * base^(-2i/n_rot), optionally scaled."""
    n_rot = cfg.n_rot or cfg.head_dim
    half = n_rot // 2
    i = np.arange(half, dtype=np.float64)
    inv = cfg.freq_base ** (-2 * i / n_rot)
    mscale = 1.0
    th = pos[:, None].astype(np.float64) * inv[None, :]
    if cfg.scaling == "linear":
        th = th * cfg.freq_scale
    elif cfg.scaling == "llama3":
        wl = 2 * math.pi / inv
        lo_wl, hi_wl = cfg.n_ctx_orig / cfg.low_freq_factor, cfg.n_ctx_orig / cfg.high_freq_factor
        smooth = (cfg.n_ctx_orig / wl - cfg.low_freq_factor) / (cfg.high_freq_factor - cfg.low_freq_factor)
        new = np.where(
            wl < hi_wl, inv, np.where(wl > lo_wl, inv / cfg.factor, (1 - smooth) * inv / cfg.factor + smooth * inv)
        )
        th = pos[:, None] * new[None, :]
    elif cfg.scaling == "yarn":

        def corr(turns):
            return n_rot * math.log(cfg.n_ctx_orig / (turns * 2 * math.pi)) / (2 * math.log(cfg.freq_base))

        lo = max(0.0, math.floor(corr(cfg.beta_fast)))
        hi = min(n_rot - 1.0, math.ceil(corr(cfg.beta_slow)))
        ramp = 1 - np.clip((i - lo) / max(0.001, hi - lo), 0, 1)
        ext = 1.0 if cfg.ext_factor < 0 else cfg.ext_factor
        mix = ramp * ext
        th = th * cfg.freq_scale * (1 - mix) + th * mix
        mscale = 1 + 0.1 * math.log(1 / cfg.freq_scale)
    mscale *= cfg.attn_factor
    c, s = np.cos(th) * mscale, np.sin(th) * mscale
    y = x.astype(np.float64).copy()
    if cfg.neox:
        a, b = y[..., :half].copy(), y[..., half:n_rot].copy()
        y[..., :half] = a * c[:, None] - b * s[:, None]
        y[..., half:n_rot] = a * s[:, None] + b * c[:, None]
    else:
        a, b = y[..., 0:n_rot:2].copy(), y[..., 1:n_rot:2].copy()
        y[..., 0:n_rot:2] = a * c[:, None] - b * s[:, None]
        y[..., 1:n_rot:2] = a * s[:, None] + b * c[:, None]
    return y


ROPES = [
    K.RopeConfig(64),
    K.RopeConfig(64, neox=True, freq_base=1e6),
    K.RopeConfig(64, n_rot=32, neox=True),  # partial rotary (Phi-style)
    K.RopeConfig(80, n_rot=40),
    K.RopeConfig(64, scaling="linear", freq_scale=0.25),
    K.RopeConfig(128, neox=True, freq_base=5e5, scaling="llama3", n_ctx_orig=8192, factor=8.0),
    K.RopeConfig(64, neox=True, scaling="yarn", freq_scale=0.25, n_ctx_orig=4096),
    K.RopeConfig(64, scaling="yarn", freq_scale=0.5, n_ctx_orig=2048, ext_factor=0.5, attn_factor=0.9),
]


@pytest.mark.parametrize(
    "cfg", ROPES, ids=lambda c: f"{c.head_dim}-{c.n_rot}-{'neox' if c.neox else 'norm'}-{c.scaling}"
)
def test_rope(cfg):
    x = RNG.standard_normal((5, 3, cfg.head_dim)).astype(np.float32)
    pos = np.array([0, 1, 17, 1000, 31999], np.int32)
    got = K.rope(cfg, x, pos)
    np.testing.assert_allclose(got, rope_ref(cfg, x, pos), rtol=1e-5, atol=2e-5)
    n_rot = cfg.n_rot or cfg.head_dim
    np.testing.assert_array_equal(got[..., n_rot:], x[..., n_rot:])  # pass-through dims
    if cfg.scaling == "none" and cfg.attn_factor == 1.0:
        np.testing.assert_array_equal(got[0], x[0])  # position 0: identity


def test_rope_scaling_properties():
    x = RNG.standard_normal((1, 2, 64)).astype(np.float32)
    plain = K.RopeConfig(64)
    lin = K.RopeConfig(64, scaling="linear", freq_scale=0.25)
    np.testing.assert_allclose(K.rope(lin, x, [400]), K.rope(plain, x, [100]), atol=1e-5)
    yarn1 = K.RopeConfig(64, scaling="yarn", freq_scale=1.0, n_ctx_orig=4096)
    np.testing.assert_allclose(K.rope(yarn1, x, [777]), K.rope(plain, x, [777]), atol=1e-5)


def test_rope_freq_factors_as_in_gguf_rope_freqs():
    """Per-pair frequency divisors (Llama 3.1 ships its scaling as rope_freqs.weight) give the same
    rotation as the Llama-3 formula that produced them."""
    cfg3 = K.RopeConfig(128, neox=True, freq_base=5e5, scaling="llama3", n_ctx_orig=8192, factor=8.0)
    i = np.arange(64, dtype=np.float64)
    inv = 5e5 ** (-2 * i / 128)
    wl = 2 * math.pi / inv
    smooth = (8192 / wl - 1.0) / (4.0 - 1.0)
    new = np.where(wl < 8192 / 4.0, inv, np.where(wl > 8192 / 1.0, inv / 8.0, (1 - smooth) * inv / 8.0 + smooth * inv))
    cff = K.RopeConfig(128, neox=True, freq_base=5e5, freq_factors=tuple(inv / new))
    x = RNG.standard_normal((3, 2, 128)).astype(np.float32)
    pos = np.array([5, 900, 20000], np.int32)
    np.testing.assert_allclose(K.rope(cff, x, pos), K.rope(cfg3, x, pos), rtol=1e-5, atol=2e-5)
    with pytest.raises(ValueError):
        K.RopeConfig(128, freq_factors=(1.0,) * 63)


def test_rope_rejects_bad_configs():
    with pytest.raises(ValueError):
        K.RopeConfig(64, n_rot=63)
    with pytest.raises(ValueError):
        K.RopeConfig(64, scaling="ntk")
    with pytest.raises(K.KernelError):
        K.rope(K.RopeConfig(64, scaling="yarn"), np.zeros((1, 1, 64), np.float32), [0])  # no n_ctx_orig


# --- attention ------------------------------------------------------------------------------------------


def attn_ref(cfg: K.AttentionConfig, q, k, v, pos):
    n_tok, n_kv = q.shape[0], k.shape[0]
    group = cfg.n_head // cfg.n_head_kv
    scale = cfg.scale if cfg.scale is not None else 1 / math.sqrt(cfg.head_dim)
    kd, vd = k.astype(np.float64), v.astype(np.float64)
    out = np.zeros(q.shape, np.float64)
    for t in range(n_tok):
        j = np.arange(n_kv)
        vis = np.ones(n_kv, bool)
        if cfg.causal:
            vis &= j <= pos[t]
        if cfg.window > 0:
            vis &= pos[t] - j < cfg.window
        if not vis.any():
            continue
        for h in range(cfg.n_head):
            s = kd[:, h // group] @ q[t, h].astype(np.float64) * scale
            if cfg.softcap > 0:
                s = cfg.softcap * np.tanh(s / cfg.softcap)
            s = np.where(vis, s, -np.inf)
            p = np.exp(s - s.max())
            p /= p.sum()
            out[t, h] = p @ vd[:, h // group]
    return out


ATTNS = [
    K.AttentionConfig(4, 4, 32),
    K.AttentionConfig(4, 2, 128),  # the register-held head sizes
    K.AttentionConfig(8, 2, 256),  # Gemma's head size: a block of tokens takes tiles of 32 positions
    K.AttentionConfig(3, 3, 20),  # a head size with a scalar tail
    K.AttentionConfig(9, 3, 64),  # GQA as in SmolLM2
    K.AttentionConfig(14, 2, 64),  # groups of 7: two subgroups
    K.AttentionConfig(4, 2, 96),  # phi3's 96 = 64 + 32 at 512 bits
    K.AttentionConfig(4, 4, 96),  # phi3's multi-head attention: a head alone sums V in passes of 6 vectors
    K.AttentionConfig(2, 2, 128),  # ... and of 8 (two passes; Q8_0: two blocks each), one of 8 zmm
    K.AttentionConfig(3, 1, 48),  # 48 = three 16-value steps
    K.AttentionConfig(8, 1, 16, softcap=30.0),  # MQA + Gemma-2 soft-capping
    K.AttentionConfig(4, 2, 32, window=5),  # sliding window
    K.AttentionConfig(2, 2, 8, causal=False, scale=0.5),
]


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("kv_dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    "cfg", ATTNS, ids=lambda c: f"h{c.n_head}-kv{c.n_head_kv}-d{c.head_dim}-w{c.window}-c{c.softcap}"
)
def test_attention(cfg, kv_dtype, isa):
    n_kv, n_tok = 23, 6
    q = RNG.standard_normal((n_tok, cfg.n_head, cfg.head_dim)).astype(np.float32)
    k = (RNG.standard_normal((n_kv, cfg.n_head_kv, cfg.head_dim)) * 2).astype(kv_dtype)
    v = RNG.standard_normal((n_kv, cfg.n_head_kv, cfg.head_dim)).astype(kv_dtype)
    pos = np.array([0, 3, 10, 17, 21, 22], np.int32)  # a prompt batch at its positions
    want = attn_ref(cfg, q, k, v, pos)
    with K.ThreadPool(2) as pool:
        got = K.attention(pool, cfg, q, k, v, pos, isa=isa)
    np.testing.assert_allclose(got, want, atol=ATTN_ATOL, rtol=1e-4)
    np.testing.assert_allclose(K.attention(None, cfg, q, k, v, pos, isa=isa), got, atol=1e-6)


def test_attention_rejects_bad_shapes():
    cfg = K.AttentionConfig(4, 2, 8)
    q = np.zeros((1, 4, 8), np.float32)
    with pytest.raises(K.KernelError):
        K.attention(None, cfg, q, np.zeros((3, 4, 8), np.float32), np.zeros((3, 4, 8), np.float32), [0])
    with pytest.raises(K.KernelError):
        K.attention(None, cfg, q, np.zeros((3, 2, 8), np.float32), np.zeros((3, 2, 8), np.float16), [0])
    kv = np.zeros((3, 2, 8), np.float32)
    with pytest.raises(K.KernelError, match="kv_block"):  # arranged caches without their block size
        K.attention(None, cfg, q, kv, kv, [0], blocked=(kv, kv))
    with pytest.raises(K.KernelError, match="as many bytes"):
        K.attention(None, cfg, q, kv, kv, [0], kv_block=2, blocked=(kv[:2], kv))
    with pytest.raises(ValueError):
        K.AttentionConfig(6, 4, 8)


def test_fp16_conversions_match_numpy():
    """The library's own float16 rounding (round to nearest even, subnormals, overflow to inf)."""
    rng = np.random.default_rng(5)
    x = np.concatenate(
        [
            rng.standard_normal(4000).astype(np.float32) * 100,
            (rng.standard_normal(1000) * 1e-6).astype(np.float32),  # float16 subnormals
            np.array(
                [
                    0.0,
                    -0.0,
                    65504.0,
                    65519.99,
                    65520.0,
                    1e9,
                    -1e9,
                    np.inf,
                    -np.inf,
                    6.1035156e-05,
                    5.9604645e-08,
                    2.9802322e-08,
                    2.9802326e-08,
                    1.0009765625,
                    1.00048828125,
                    1.00146484375,
                ],
                np.float32,
            ),  # edges and ties
        ]
    )
    h = np.empty(x.size, np.uint16)
    K.lib.llk_fp32_to_fp16(K.ffi.from_buffer("float[]", x), K.ffi.from_buffer("uint16_t[]", h), x.size)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(h, want.view(np.uint16))
    back = np.empty(x.size, np.float32)
    K.lib.llk_fp16_to_fp32(K.ffi.from_buffer("uint16_t[]", h), K.ffi.from_buffer("float[]", back), x.size)
    np.testing.assert_array_equal(back, h.view(np.float16).astype(np.float32))
    nan = np.array([np.nan], np.float32)
    K.lib.llk_fp32_to_fp16(K.ffi.from_buffer("float[]", nan), K.ffi.from_buffer("uint16_t[]", h), 1)
    assert np.isnan(h[:1].view(np.float16)[0])


LONG_ATTNS = [
    K.AttentionConfig(9, 3, 64),
    K.AttentionConfig(14, 2, 64),
    K.AttentionConfig(4, 1, 256, softcap=50.0),
    K.AttentionConfig(4, 2, 32, window=300),
    K.AttentionConfig(4, 2, 32, window=5),  # most splits see nothing
]


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize(
    "cfg", LONG_ATTNS, ids=lambda c: f"h{c.n_head}-kv{c.n_head_kv}-d{c.head_dim}-w{c.window}-c{c.softcap}"
)
def test_long_attention_of_one_token_is_split_across_threads_and_merged(cfg, isa):
    """A generated token over a long cache has too few (token, KV head) items for the pool, so
    the positions are split too and the partial softmaxes merged: equal to the reference, and bit
    for bit to the same attention without a pool (the split never depends on the thread count)."""
    n_kv = 1300
    k = (RNG.standard_normal((n_kv, cfg.n_head_kv, cfg.head_dim)) * 2).astype(np.float16)
    v = RNG.standard_normal((n_kv, cfg.n_head_kv, cfg.head_dim)).astype(np.float16)
    for pos in (n_kv - 1, 700):
        q = RNG.standard_normal((1, cfg.n_head, cfg.head_dim)).astype(np.float32)
        want = attn_ref(cfg, q, k, v, np.array([pos], np.int32))
        with K.ThreadPool(2) as pool:
            got = K.attention(pool, cfg, q, k, v, [pos], isa=isa)
        np.testing.assert_allclose(got, want, atol=ATTN_ATOL, rtol=1e-4)
        np.testing.assert_array_equal(K.attention(None, cfg, q, k, v, [pos], isa=isa), got)
