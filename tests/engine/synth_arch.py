"""Tiny random-weight GGUF models of the architectures after llama, for the decoder's switches:
QKV biases (qwen2), QK-norm (qwen3), post-norms, GeGLU, soft-caps, sliding windows and embedding
scale (gemma2). Written with gguf.GGUFWriter; norm weights random (not ones) so that every weight
vector is exercised. Only the tensors and keys the decoder reads; no tokenizer.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

FEATURES = {
    "qwen2": dict(biases=True),
    "qwen3": dict(qk_norm=True),
    "gemma2": dict(post_norms=True, sliding_window=5, attn_softcap=20.0, final_softcap=15.0),
    "llama": dict(),
}


def write_arch_model(path: str | Path, arch: str, seed: int = 0, n_embd: int = 64, n_head: int = 4,
                     n_head_kv: int = 2, n_ff: int = 96, n_layer: int = 3, n_vocab: int = 300,
                     tied: bool = False) -> Path:
    import gguf

    f = FEATURES[arch]
    rng = np.random.default_rng(seed)
    path = Path(path)
    head_dim = n_embd // n_head
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(128)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(0)
    if f.get("sliding_window"):
        w.add_uint32(f"{arch}.attention.sliding_window", f["sliding_window"])
    if f.get("attn_softcap"):
        w.add_float32(f"{arch}.attn_logit_softcapping", f["attn_softcap"])
    if f.get("final_softcap"):
        w.add_float32(f"{arch}.final_logit_softcapping", f["final_softcap"])

    def t(name, *shape, scale=0.2, around=0.0):
        w.add_tensor(name, (around + rng.standard_normal(shape) * scale).astype(np.float32))

    t("token_embd.weight", n_vocab, n_embd, scale=1.0)
    for i in range(n_layer):
        p = f"blk.{i}."
        t(p + "attn_norm.weight", n_embd, scale=0.1, around=1.0)
        t(p + "attn_q.weight", n_head * head_dim, n_embd)
        t(p + "attn_k.weight", n_head_kv * head_dim, n_embd)
        t(p + "attn_v.weight", n_head_kv * head_dim, n_embd)
        if f.get("biases"):
            t(p + "attn_q.bias", n_head * head_dim, scale=0.5)
            t(p + "attn_k.bias", n_head_kv * head_dim, scale=0.5)
            t(p + "attn_v.bias", n_head_kv * head_dim, scale=0.5)
        if f.get("qk_norm"):
            t(p + "attn_q_norm.weight", head_dim, scale=0.1, around=1.0)
            t(p + "attn_k_norm.weight", head_dim, scale=0.1, around=1.0)
        t(p + "attn_output.weight", n_embd, n_head * head_dim)
        if f.get("post_norms"):
            t(p + "post_attention_norm.weight", n_embd, scale=0.1, around=1.0)
            t(p + "post_ffw_norm.weight", n_embd, scale=0.1, around=1.0)
        t(p + "ffn_norm.weight", n_embd, scale=0.1, around=1.0)
        t(p + "ffn_gate.weight", n_ff, n_embd)
        t(p + "ffn_up.weight", n_ff, n_embd)
        t(p + "ffn_down.weight", n_embd, n_ff)
    t("output_norm.weight", n_embd, scale=0.1, around=1.0)
    if not tied:
        t("output.weight", n_vocab, n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
