"""Tiny seeded random-weight GGUF models of each architecture the engine runs, for the decoder's
switches and for llama.cpp goldens: QKV biases (qwen2), QK-norm (qwen3), Llama-3 rope_freqs and a
Mistral-style sliding_window key (llama), post-norms, GeGLU, soft-caps, sliding windows and
embedding scale (gemma2; gemma without the norms, caps and windows), QK-norm + 5:1 local/global
layers with their own rope base and head_dim != n_embd / n_head (gemma3), fused QKV and gate/up
tensors, partial rotary dimensions and LongRoPE short/long factors (phi3), linear and YaRN RoPE
scaling (llama, qwen2). Written with
gguf.GGUFWriter with the tiny byte-level vocabulary of tests/synth.py (so llama.cpp loads them);
norm weights random, not ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# per architecture: the features its synthetic model carries
FEATURES = {
    "llama": dict(),
    "qwen2": dict(biases=True),
    "qwen3": dict(qk_norm=True),
    # a Mistral-style file: sliding_window key (llama.cpp ignores it for llama) and Llama-3.1
    # frequency divisors in rope_freqs.weight
    "llama_variant": dict(arch="llama", sliding_window=6, rope_freqs=True, rope_base=500000.0),
    "gemma": dict(gemma=True),
    "gemma2": dict(post_norms=True, sliding_window=5, attn_softcap=20.0, final_softcap=15.0, gemma=True),
    # at gemma2-27B's 46 layers llama.cpp scales queries by 1/sqrt(n_embd / n_head), not by
    # 1/sqrt(key_length): a key_length of 24 against n_embd / n_head = 16 tells them apart
    "gemma2_46": dict(
        arch="gemma2",
        post_norms=True,
        sliding_window=5,
        attn_softcap=20.0,
        final_softcap=15.0,
        gemma=True,
        key_length=24,
        n_layer=46,
    ),
    "gemma3": dict(
        post_norms=True,
        qk_norm=True,
        sliding_window=4,
        gemma=True,
        key_length=24,
        rope_base=1000000.0,
        rope_base_swa=10000.0,
    ),
    # fused QKV and gate/up, half the head dims rotated, LongRoPE factors and attention factor:
    # the short factors within the original context (llama.cpp's n_ctx 512 <= 4096) ...
    "phi3": dict(fused=True, rope_dim=8, longrope=True, orig_ctx=4096),
    # ... and the long ones past it (512 > 256)
    "phi3_long": dict(arch="phi3", fused=True, rope_dim=8, longrope=True, orig_ctx=256),
    # RoPE scaling as the files' rope.scaling.* keys say it: linear (positions divided by the
    # factor), and YaRN the way Qwen2.5 sets it (type yarn, factor 4, the original context the
    # training length: llama.cpp's n_ctx 512 = 4 x 128), in NeoX (qwen2) and normal (llama) order
    "llama_linear": dict(arch="llama", rope_scaling="linear", rope_factor=4.0),
    "qwen2_yarn": dict(arch="qwen2", biases=True, rope_scaling="yarn", rope_factor=4.0, orig_ctx=128),
    "llama_yarn": dict(arch="llama", rope_scaling="yarn", rope_factor=4.0, orig_ctx=128),
}


def write_arch_model(
    path: str | Path,
    name: str,
    seed: int = 0,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 96,
    n_layer: int | None = None,
    tied: bool = False,
    swa_pattern: int | list[bool] | None = None,
) -> Path:
    import gguf

    from tests.synth import tiny_vocab

    f = FEATURES[name]
    arch = f.get("arch", name)
    if n_layer is None:  # gemma3: one global layer after five local ones, then local
        n_layer = f.get("n_layer", 7 if arch == "gemma3" else 3)
    rng = np.random.default_rng(seed)
    path = Path(path)
    tokens, types, merges = tiny_vocab()
    n_vocab = len(tokens)
    head_dim = f.get("key_length", n_embd // n_head)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(128)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    if "key_length" in f:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_freq_base(f.get("rope_base", 10000.0))
    if "rope_base_swa" in f:
        w.add_float32(f"{arch}.rope.freq_base_swa", f["rope_base_swa"])
    w.add_layer_norm_rms_eps(1e-6)
    if "rope_dim" in f:
        w.add_rope_dimension_count(f["rope_dim"])
    if f.get("longrope"):
        w.add_uint32(f"{arch}.rope.scaling.original_context_length", f["orig_ctx"])
        w.add_float32(f"{arch}.rope.scaling.attn_factor", 1.1)
    if f.get("rope_scaling"):
        w.add_string(f"{arch}.rope.scaling.type", f["rope_scaling"])
        w.add_float32(f"{arch}.rope.scaling.factor", f["rope_factor"])
        if "orig_ctx" in f:
            w.add_uint32(f"{arch}.rope.scaling.original_context_length", f["orig_ctx"])
    w.add_file_type(0)
    if f.get("sliding_window"):
        w.add_uint32(f"{arch}.attention.sliding_window", f["sliding_window"])
    if isinstance(swa_pattern, list):  # attention.sliding_window_pattern, as a flag a layer
        w.add_array(f"{arch}.attention.sliding_window_pattern", swa_pattern)
    elif swa_pattern is not None:  # or as a period
        w.add_uint32(f"{arch}.attention.sliding_window_pattern", swa_pattern)
    if f.get("attn_softcap"):
        w.add_float32(f"{arch}.attn_logit_softcapping", f["attn_softcap"])
    if f.get("final_softcap"):
        w.add_float32(f"{arch}.final_logit_softcapping", f["final_softcap"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.add_add_bos_token(False)

    def t(name, *shape, scale=0.2, around=0.0):
        w.add_tensor(name, (around + rng.standard_normal(shape) * scale).astype(np.float32))

    # gemma scales embeddings by sqrt(n_embd): smaller ones keep the residual stream near 1
    t("token_embd.weight", n_vocab, n_embd, scale=n_embd**-0.5 if f.get("gemma") else 1.0)
    if f.get("rope_freqs"):
        # Llama-3.1-shaped divisors: 1 for high frequencies, up to 8 for the low ones
        w.add_tensor("rope_freqs.weight", np.linspace(1.0, 8.0, head_dim // 2).astype(np.float32))
    if f.get("longrope"):
        n_pairs = f["rope_dim"] // 2
        w.add_tensor("rope_factors_short.weight", np.linspace(1.0, 1.5, n_pairs).astype(np.float32))
        w.add_tensor("rope_factors_long.weight", np.linspace(1.0, 6.0, n_pairs).astype(np.float32))
    for i in range(n_layer):
        p = f"blk.{i}."
        t(p + "attn_norm.weight", n_embd, scale=0.1, around=1.0)
        if f.get("fused"):
            t(p + "attn_qkv.weight", (n_head + 2 * n_head_kv) * head_dim, n_embd)
        else:
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
        if f.get("fused"):
            t(p + "ffn_up.weight", 2 * n_ff, n_embd)  # gate rows first, then up
        else:
            t(p + "ffn_gate.weight", n_ff, n_embd)
            t(p + "ffn_up.weight", n_ff, n_embd)
        t(p + "ffn_down.weight", n_embd, n_ff)
    t("output_norm.weight", n_embd, scale=0.1, around=1.0)
    if not tied and not f.get("gemma"):
        t("output.weight", n_vocab, n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
