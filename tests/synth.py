"""Tiny seeded random-weight GGUF models, written with `gguf.GGUFWriter` for tests.

`write_tiny_model(path, arch="llama", seed=0)` gives a file of a few hundred KB with the
metadata and tensor names llama.cpp expects for that architecture, and a byte-level BPE
vocabulary (256 byte tokens, a few merges, ChatML control tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.text.tokenizer import byte_to_unicode


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass(frozen=True)
class TinySpec:
    arch: str = "llama"
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 128
    n_ctx: int = 256
    rope_base: float = 10000.0
    eps: float = 1e-5
    tied_output: bool = False


def tiny_vocab() -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges): specials first, then 256 byte tokens, then merged pairs."""
    b2u = byte_to_unicode()
    tokens = list(SPECIALS) + [b2u[b] for b in range(256)]
    types = [3] * len(SPECIALS) + [1] * 256
    merges = []
    for a, b in [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("o", "n")]:
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        types.append(1)
    return tokens, types, merges


def _begin(path: Path, spec: TinySpec, name: str, n_vocab: int):
    """A GGUFWriter with the decoder's hyper-parameters written (F32 weights follow)."""
    import gguf

    w = gguf.GGUFWriter(str(path), spec.arch)
    w.add_name(name)
    w.add_context_length(spec.n_ctx)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.n_ff)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_head_kv)
    w.add_rope_freq_base(spec.rope_base)
    w.add_layer_norm_rms_eps(spec.eps)
    w.add_rope_dimension_count(spec.n_embd // spec.n_head)
    w.add_vocab_size(n_vocab)
    w.add_file_type(0)
    return w


def _add_extra(w, extra_metadata: dict | None) -> None:
    """Extra keys; a value may be (value, gguf.GGUFValueType[, element type]) to force its type.
    A key that exists already is overwritten."""
    for k, v in (extra_metadata or {}).items():
        if isinstance(v, tuple):
            w.add_key_value(k, *v)
        elif isinstance(v, str):
            w.add_string(k, v)
        elif isinstance(v, bool):
            w.add_bool(k, v)
        elif isinstance(v, int):
            w.add_uint32(k, v)
        elif isinstance(v, float):
            w.add_float32(k, v)
        else:
            w.add_array(k, v)


def _finish(w, spec: TinySpec, n_vocab: int, rng: np.random.Generator, path: Path) -> Path:
    """Seeded random F32 weights for every llama tensor, then the file is written."""

    def t(name: str, *shape: int, scale: float = 0.02, ones: bool = False) -> None:
        data = np.ones(shape, np.float32) if ones else (rng.standard_normal(shape) * scale).astype(np.float32)
        w.add_tensor(name, data)

    head_dim = spec.n_embd // spec.n_head
    t("token_embd.weight", n_vocab, spec.n_embd, scale=1.0)
    for i in range(spec.n_layer):
        p = f"blk.{i}"
        t(f"{p}.attn_norm.weight", spec.n_embd, ones=True)
        t(f"{p}.attn_q.weight", spec.n_head * head_dim, spec.n_embd, scale=0.2)
        t(f"{p}.attn_k.weight", spec.n_head_kv * head_dim, spec.n_embd, scale=0.2)
        t(f"{p}.attn_v.weight", spec.n_head_kv * head_dim, spec.n_embd, scale=0.2)
        t(f"{p}.attn_output.weight", spec.n_embd, spec.n_head * head_dim, scale=0.2)
        t(f"{p}.ffn_norm.weight", spec.n_embd, ones=True)
        t(f"{p}.ffn_gate.weight", spec.n_ff, spec.n_embd, scale=0.2)
        t(f"{p}.ffn_up.weight", spec.n_ff, spec.n_embd, scale=0.2)
        t(f"{p}.ffn_down.weight", spec.n_embd, spec.n_ff, scale=0.2)
    t("output_norm.weight", spec.n_embd, ones=True)
    if not spec.tied_output:
        t("output.weight", n_vocab, spec.n_embd, scale=0.2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_tiny_model(
    path: str | Path, spec: TinySpec = TinySpec(), seed: int = 0, extra_metadata: dict | None = None
) -> Path:
    rng = np.random.default_rng(seed)
    path = Path(path)
    tokens, types, merges = tiny_vocab()
    n_vocab = len(tokens)
    w = _begin(path, spec, f"tiny-{spec.arch}-seed{seed}", n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(SPECIALS.index("<|im_end|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)
    _add_extra(w, extra_metadata)
    return _finish(w, spec, n_vocab, rng, path)


# ---- SentencePiece-style vocabularies (tokenizer.ggml.model == "llama") -----------------------

SPM_VOCAB_JSON = Path(__file__).resolve().parent / "data" / "text" / "spm_vocab.json"
LLAMA2_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + message['content'] + eos_token }}{% endif %}{% endfor %}"
)


def spm_vocab() -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types) of the committed synthetic SentencePiece vocabulary."""
    import json

    d = json.loads(SPM_VOCAB_JSON.read_text())
    return d["tokens"], d["scores"], d["types"]


def write_tiny_spm_model(
    path: str | Path,
    add_space_prefix: bool | None = True,
    add_bos: bool = True,
    chat_template: str | None = LLAMA2_TEMPLATE,
    seed: int = 0,
    extra_metadata: dict | None = None,
    spec: TinySpec = TinySpec(),
    type_overrides: dict[int, int] | None = None,
) -> Path:
    """A tiny random-weight llama model with the synthetic SentencePiece vocabulary.

    `add_space_prefix=None` leaves the key out (llama.cpp then defaults to true for "llama");
    `type_overrides` {token id: GGUF token type} changes some token types (unused, undefined...)."""
    rng = np.random.default_rng(seed)
    path = Path(path)
    tokens, scores, types = spm_vocab()
    for i, t in (type_overrides or {}).items():
        types[i] = t
    n_vocab = len(tokens)
    w = _begin(path, spec, f"tiny-spm-{spec.arch}-seed{seed}", n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(add_bos)
    w.add_add_eos_token(False)
    if add_space_prefix is not None:
        w.add_add_space_prefix(add_space_prefix)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    _add_extra(w, extra_metadata)
    return _finish(w, spec, n_vocab, rng, path)


# ---- byte-level BPE vocabularies with any pre-tokenizer name ----------------------------------


def write_tiny_bpe_model(
    path: str | Path,
    tokens: list[str],
    types: list[int],
    merges: list[str],
    pre: str | None = "default",
    bos_id: int | None = None,
    eos_id: int | None = None,
    add_bos: bool | None = False,
    chat_template: str | None = None,
    seed: int = 0,
    extra_metadata: dict | None = None,
    spec: TinySpec = TinySpec(n_embd=8, n_head=2, n_head_kv=1, n_ff=16, n_layer=1, tied_output=True),
) -> Path:
    """A tiny random-weight llama model with a given byte-level BPE vocabulary (for example one
    copied from a real model) and any `tokenizer.ggml.pre` (None leaves the key out)."""
    rng = np.random.default_rng(seed)
    path = Path(path)
    n_vocab = len(tokens)
    w = _begin(path, spec, f"tiny-bpe-{pre}-seed{seed}", n_vocab)
    w.add_tokenizer_model("gpt2")
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    if bos_id is not None:
        w.add_bos_token_id(bos_id)
    if eos_id is not None:
        w.add_eos_token_id(eos_id)
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    _add_extra(w, extra_metadata)
    return _finish(w, spec, n_vocab, rng, path)


def smollm2_vocab(path: str | Path) -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges) read from the SmolLM2 file, to reuse with other pre names."""
    from app.gguf import open_gguf

    with open_gguf(path) as f:
        md = f.metadata
        return (
            md.string_array("tokenizer.ggml.tokens"),
            [int(x) for x in md.numeric_array("tokenizer.ggml.token_type", "int")],
            md.string_array("tokenizer.ggml.merges"),
        )
