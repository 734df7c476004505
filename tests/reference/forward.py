"""Plain numpy float32 forward pass of a llama-family decoder, from dequantized GGUF weights.

The oracle of the C decoder on synthetic models (and, for a few positions, on SmolLM2). It is
written to be read, not to be fast: every weight is dequantized once with `gguf.quants.dequantize`
(the dequantization oracle), and a sequence is run from position 0 with full causal attention.
Covers: RMSNorm, RoPE (normal or NeoX pair order, base, rotated dims), grouped-query attention,
SwiGLU or GeGLU (tanh), tied or separate output, and the switches of the next architectures as the
config names them: QKV/output biases, QK-norm, post-norms, sliding windows per layer, embedding
scale, attention and final logit soft-caps, a per-layer RoPE base (gemma3's local layers), a query
scale, RoPE frequency divisors (rope_freqs.weight; phi3's LongRoPE factors, chosen by n_ctx, and
attention factor), fused QKV and gate/up weights. Not covered: layer norm, RoPE scaling.
"""

from __future__ import annotations

import numpy as np

from app.gguf import open_gguf
from app.model import DecoderConfig, config_from_gguf


def dequantize_tensor(f, name: str) -> np.ndarray:
    """A GGUF tensor as float32 (n_rows, row_length), through gguf.quants.dequantize."""
    import gguf

    info = f.tensors[name]
    raw = np.ascontiguousarray(f.tensor_bytes(name))
    qtype = gguf.GGMLQuantizationType(info.type.id)
    out = gguf.quants.dequantize(raw.reshape(-1), qtype).astype(np.float32)
    return out.reshape(info.n_rows, info.dims[0]) if len(info.dims) > 1 else out.reshape(-1)


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """x: (T, C) -> x / sqrt(mean(x^2) + eps) * w."""
    ms = np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True)
    return (x / np.sqrt(ms + eps)).astype(np.float32) * w


def rope(
    x: np.ndarray,
    pos: np.ndarray,
    n_rot: int,
    base: float,
    neox: bool,
    freq_factors: np.ndarray | None = None,
    attn_factor: float = 1.0,
    scaling: str = "none",
    factor: float = 1.0,
    n_ctx_orig: int = 0,
) -> np.ndarray:
    """x: (T, H, D) rotated at positions pos (T,). Normal order rotates pairs (2i, 2i+1), NeoX
    order pairs (i, i + n_rot/2); dims past n_rot pass through. freq_factors (n_rot/2,): divisors
    of the pairs' frequencies (GGUF rope_freqs.weight, LongRoPE factors); attn_factor scales cos and
    sin (LongRoPE's magnitude factor). scaling "linear": angles divided by `factor`; "yarn" (Peng et
    al. 2023): pair i keeps its angle below the dimension where it turns 32 times over n_ctx_orig,
    is divided by `factor` above the one where it turns once, a linear ramp between; cos and sin
    scaled by 1 + 0.1 ln(factor)."""
    half = n_rot // 2
    i = np.arange(half, dtype=np.float64)
    inv_freq = base ** (-2.0 * i / n_rot)
    if freq_factors is not None:
        inv_freq = inv_freq / freq_factors.astype(np.float64)
    if scaling == "linear":
        inv_freq = inv_freq / factor
    elif scaling == "yarn":

        def corr_dim(turns):
            return n_rot * np.log(n_ctx_orig / (turns * 2 * np.pi)) / (2 * np.log(base))

        lo, hi = max(0.0, np.floor(corr_dim(32.0))), min(n_rot - 1.0, np.ceil(corr_dim(1.0)))
        keep = 1.0 - np.clip((i - lo) / max(0.001, hi - lo), 0.0, 1.0)  # share of the original angle
        inv_freq = inv_freq * (keep + (1.0 - keep) / factor)
        attn_factor = attn_factor * (1.0 + 0.1 * np.log(factor))
    elif scaling != "none":
        raise NotImplementedError(f"rope scaling {scaling!r}")
    theta = pos[:, None].astype(np.float64) * inv_freq[None, :]  # (T, half)
    cos = (np.cos(theta) * attn_factor)[:, None, :].astype(np.float32)
    sin = (np.sin(theta) * attn_factor)[:, None, :].astype(np.float32)
    y = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:n_rot]
        y[..., :half] = a * cos - b * sin
        y[..., half:n_rot] = a * sin + b * cos
    else:
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        y[..., 0:n_rot:2] = a * cos - b * sin
        y[..., 1:n_rot:2] = a * sin + b * cos
    return y


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


class ReferenceModel:
    """All weights of a GGUF file dequantized to float32; `forward(tokens)` -> (T, n_vocab) logits."""

    def __init__(self, path, kv_f16: bool = False, n_ctx: int = 512):
        self.path = str(path)
        self.kv_f16 = kv_f16  # round K and V through float16, as a float16 KV cache does
        with open_gguf(path) as f:
            self.cfg: DecoderConfig = config_from_gguf(f)
            self.w = {name: dequantize_tensor(f, name) for name in f.tensors}
        c = self.cfg
        self.freq_factors = self.w.get("rope_freqs.weight") if c.rope_freqs else None
        if c.rope_longrope:  # phi3: long factors once the context passes the original one
            which = "long" if n_ctx > (c.rope_orig_ctx or c.n_ctx_train) else "short"
            self.freq_factors = self.w[f"rope_factors_{which}.weight"]
        hd, kd = c.n_head * c.head_dim, c.n_head_kv * c.head_dim
        for il in range(c.n_layer):  # fused weights (phi3) split into their parts
            p = f"blk.{il}."
            qkv = self.w.pop(p + "attn_qkv.weight", None)
            if qkv is not None:
                self.w[p + "attn_q.weight"], self.w[p + "attn_k.weight"], self.w[p + "attn_v.weight"] = (
                    qkv[:hd],
                    qkv[hd : hd + kd],
                    qkv[hd + kd :],
                )
            if c.spec.fused_ffn:
                up = self.w[p + "ffn_up.weight"]
                self.w[p + "ffn_gate.weight"], self.w[p + "ffn_up.weight"] = up[: c.n_ff], up[c.n_ff :]
        if self.cfg.spec.norm_kind != "rms" or self.cfg.rope_scaling not in ("none", "linear", "yarn"):
            raise NotImplementedError("reference covers RMS norm with no, linear or YaRN RoPE scaling only")

    def _opt(self, name: str):
        return self.w.get(name)

    def forward(self, tokens) -> np.ndarray:
        from app.engine.decoder import layer_rope_base, layer_window

        c, w, spec = self.cfg, self.w, self.cfg.spec
        tokens = np.asarray(tokens, dtype=np.int64)
        T, hd = len(tokens), c.head_dim
        pos = np.arange(T)
        x = w["token_embd.weight"][tokens].astype(np.float32)  # (T, C)
        if spec.embd_scale_sqrt:
            x = x * np.float32(np.sqrt(c.n_embd))
        act = silu if spec.activation == "silu" else gelu_tanh
        for il in range(c.n_layer):
            p = f"blk.{il}."
            window = layer_window(c, il)
            mask = np.triu(np.full((T, T), -np.inf, np.float32), k=1)  # (T, T) causal
            if window > 0:
                mask[pos[:, None] - pos[None, :] >= window] = -np.inf
            h = rms_norm(x, w[p + "attn_norm.weight"], c.norm_eps)
            q = self._linear(h, p + "attn_q").reshape(T, c.n_head, hd)
            k = self._linear(h, p + "attn_k").reshape(T, c.n_head_kv, hd)
            v = self._linear(h, p + "attn_v").reshape(T, c.n_head_kv, hd)
            if spec.qk_norm:
                q = rms_norm(q, w[p + "attn_q_norm.weight"], c.norm_eps)
                k = rms_norm(k, w[p + "attn_k_norm.weight"], c.norm_eps)
            neox = spec.rope_kind == "neox"
            base = layer_rope_base(c, il) or c.rope_base
            ff = self.freq_factors
            sc = dict(scaling=c.rope_scaling, factor=c.rope_scale, n_ctx_orig=c.rope_orig_ctx or c.n_ctx_train)
            if layer_rope_base(c, il):  # a local layer's own base: unscaled
                sc = {}
            q = rope(q, pos, c.rope_dim, base, neox, ff, c.rope_attn_factor, **sc)
            k = rope(k, pos, c.rope_dim, base, neox, ff, c.rope_attn_factor, **sc)
            if self.kv_f16:
                k = k.astype(np.float16).astype(np.float32)
                v = v.astype(np.float16).astype(np.float32)
            att = np.empty((T, c.n_head, hd), np.float32)
            for hh in range(c.n_head):
                kh = hh // c.n_gqa
                scale = np.float32(c.attn_scale) if c.attn_scale > 0 else 1 / np.float32(np.sqrt(hd))
                s = (q[:, hh, :] @ k[:, kh, :].T) * scale  # (T, T)
                if c.attn_softcap > 0:
                    s = c.attn_softcap * np.tanh(s / c.attn_softcap)
                s = s + mask
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s /= s.sum(axis=-1, keepdims=True)
                att[:, hh, :] = s @ v[:, kh, :]
            o = self._linear(att.reshape(T, -1), p + "attn_output")
            if spec.post_norms:
                o = rms_norm(o, w[p + "post_attention_norm.weight"], c.norm_eps)
            x = x + o
            h = rms_norm(x, w[p + "ffn_norm.weight"], c.norm_eps)
            g = h @ w[p + "ffn_gate.weight"].T
            u = h @ w[p + "ffn_up.weight"].T
            o = (act(g) * u) @ w[p + "ffn_down.weight"].T
            if spec.post_norms:
                o = rms_norm(o, w[p + "post_ffw_norm.weight"], c.norm_eps)
            x = x + o
        x = rms_norm(x, w["output_norm.weight"], c.norm_eps)
        out = w["token_embd.weight"] if c.tied_output else w["output.weight"]
        logits = x @ out.T
        if c.final_softcap > 0:
            logits = c.final_softcap * np.tanh(logits / c.final_softcap)
        return logits.astype(np.float32)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        y = x @ self.w[name + ".weight"].T
        b = self.w.get(name + ".bias")
        return y if b is None else y + b


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.float32(0.7978845608028654) * (x + 0.044715 * x**3)))
