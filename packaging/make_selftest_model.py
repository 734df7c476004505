"""Write resources/selftest/tiny.gguf: the seeded tiny model that `Llambda --self-test` runs.

A llama-architecture decoder (2 layers, 128 wide, Q8_0 matrices) with a byte-level BPE vocabulary
(ChatML control tokens, 256 byte tokens, merges that spell "Hello", " from", " Llambda") and the
ChatML template. Its output matrix is built so that, asked "ping", greedy decoding answers
"Hello from Llambda!" and stops; the random attention and feed-forward layers still shape every
logit. The answer (token ids) and the logits after the prompt are computed here by a float64
numpy forward pass over the dequantized weights and stored in the file's metadata
(`llambda.selftest.*`): they are the oracle the self-test checks the real kernels against.

Beside it, tiny-spm.gguf: a vocabulary-only file (no tensors) with a SentencePiece-style
vocabulary, so the self-test also runs the bundled sentencepiece library (merges by score, byte
fallback); the expected token ids are written by construction.

Build time only (needs numpy and the `gguf` package); the bundle just reads the files.
Run: python packaging/make_selftest_model.py [OUT]   (deterministic: same bytes every run)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from app.text.tokenizer import byte_to_unicode  # noqa: E402

DEFAULT_OUT = ROOT / "resources" / "selftest" / "tiny.gguf"

SEED = 20261129
N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, N_FF, N_CTX = 128, 2, 4, 2, 256, 256
HEAD_DIM = N_EMBD // N_HEAD
ROPE_BASE, EPS = 10000.0, 1e-5
BLOCK_SCALE = 0.05  # std of the attention/FFN weights: layers move logits, do not drown the chain
CHAIN_GAIN = 2.5  # length of an output row that carries the answer chain
MIN_MARGIN = 2.0  # top-1 minus top-2 logit, at every answer step, or the script refuses

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
WORDS = ["Hello", " from", " Llambda"]
QUESTION = "ping"
ANSWER = ["Hello", " from", " Llambda", "!"]  # then <|im_end|>
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


B2U = byte_to_unicode()  # the printable stand-ins byte-level BPE uses for the 256 bytes


def spell(text: str) -> str:
    return "".join(B2U[b] for b in text.encode("utf-8"))


def vocabulary() -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges). Each word is merged left to right, one byte at a time."""
    tokens = list(SPECIALS) + [B2U[b] for b in range(256)]
    types = [3] * len(SPECIALS) + [1] * 256
    merges: list[str] = []
    for word in WORDS:
        s = spell(word)
        for i in range(2, len(s) + 1):
            left, right = s[: i - 1], s[i - 1]
            merges.append(f"{left} {right}")
            if s[:i] not in tokens:
                tokens.append(s[:i])
                types.append(1)
    return tokens, types, merges


def token_ids(tokens: list[str], text: str) -> list[int]:
    """Byte tokens of `text` (the prompt has no merged words in it)."""
    index = {t: i for i, t in enumerate(tokens)}
    return [index[B2U[b]] for b in text.encode("utf-8")]


def prompt_ids(tokens: list[str]) -> list[int]:
    im_start, im_end = tokens.index("<|im_start|>"), tokens.index("<|im_end|>")
    return (
        [im_start]
        + token_ids(tokens, "user\n" + QUESTION)
        + [im_end]
        + token_ids(tokens, "\n")
        + [im_start]
        + token_ids(tokens, "assistant\n")
    )


# ---- the float64 numpy oracle ------------------------------------------------------------------


def rms_norm(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def rope(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Normal (GPT-J style) rotation of pairs (2i, 2i+1); x: (n_tok, n_heads, head_dim)."""
    inv = ROPE_BASE ** (-np.arange(0, HEAD_DIM, 2, dtype=np.float64) / HEAD_DIM)  # (head_dim/2,)
    ang = positions[:, None].astype(np.float64) * inv[None, :]  # (n_tok, hd/2)
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


def forward(W: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """Logits (n_tok, n_vocab) of a whole sequence, causal attention with GQA."""
    n = len(ids)
    pos = np.arange(n)
    x = W["token_embd.weight"][ids]  # (n, n_embd)
    mask = np.triu(np.full((n, n), -np.inf), 1)
    group = N_HEAD // N_HEAD_KV
    for il in range(N_LAYER):
        p = f"blk.{il}."
        h = rms_norm(x, W[p + "attn_norm.weight"])
        q = rope((h @ W[p + "attn_q.weight"].T).reshape(n, N_HEAD, HEAD_DIM), pos)
        k = rope((h @ W[p + "attn_k.weight"].T).reshape(n, N_HEAD_KV, HEAD_DIM), pos)
        v = (h @ W[p + "attn_v.weight"].T).reshape(n, N_HEAD_KV, HEAD_DIM)
        heads = []
        for hh in range(N_HEAD):
            kv = hh // group
            s = q[:, hh, :] @ k[:, kv, :].T / np.sqrt(HEAD_DIM) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            heads.append((s / s.sum(axis=1, keepdims=True)) @ v[:, kv, :])
        x = x + np.concatenate(heads, axis=1) @ W[p + "attn_output.weight"].T
        h = rms_norm(x, W[p + "ffn_norm.weight"])
        g, u = h @ W[p + "ffn_gate.weight"].T, h @ W[p + "ffn_up.weight"].T
        x = x + (g / (1.0 + np.exp(-g)) * u) @ W[p + "ffn_down.weight"].T
    return rms_norm(x, W["output_norm.weight"]) @ W["output.weight"].T


def greedy(W: dict[str, np.ndarray], prompt: list[int], stop: int, limit: int = 16):
    """(answer ids ending with `stop`, logits after the prompt, smallest top-1/top-2 margin)."""
    ids, out, margin, first = list(prompt), [], np.inf, None
    for _ in range(limit):
        logits = forward(W, ids)[-1]
        if first is None:
            first = logits
        top2 = np.sort(logits)[-2:]
        margin = min(margin, top2[1] - top2[0])
        t = int(np.argmax(logits))
        out.append(t)
        ids.append(t)
        if t == stop:
            break
    return out, first, margin


# ---- writing ---------------------------------------------------------------------------------


def build_weights(tokens: list[str]) -> dict[str, np.ndarray]:
    """float32 weights; the output matrix carries the answer chain (see the module docstring)."""
    rng = np.random.default_rng(SEED)
    n_vocab = len(tokens)

    def normal(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    W = {"token_embd.weight": normal(n_vocab, N_EMBD, scale=1.0)}
    for il in range(N_LAYER):
        p = f"blk.{il}."
        W[p + "attn_norm.weight"] = np.ones(N_EMBD, np.float32)
        W[p + "attn_q.weight"] = normal(N_HEAD * HEAD_DIM, N_EMBD, scale=BLOCK_SCALE * 4)
        W[p + "attn_k.weight"] = normal(N_HEAD_KV * HEAD_DIM, N_EMBD, scale=BLOCK_SCALE * 4)
        W[p + "attn_v.weight"] = normal(N_HEAD_KV * HEAD_DIM, N_EMBD, scale=BLOCK_SCALE)
        W[p + "attn_output.weight"] = normal(N_EMBD, N_HEAD * HEAD_DIM, scale=BLOCK_SCALE)
        W[p + "ffn_norm.weight"] = (1.0 + normal(N_EMBD, scale=0.1)).astype(np.float32)
        W[p + "ffn_gate.weight"] = normal(N_FF, N_EMBD, scale=BLOCK_SCALE)
        W[p + "ffn_up.weight"] = normal(N_FF, N_EMBD, scale=BLOCK_SCALE)
        W[p + "ffn_down.weight"] = normal(N_EMBD, N_FF, scale=BLOCK_SCALE)
    W["output_norm.weight"] = np.ones(N_EMBD, np.float32)
    out = normal(n_vocab, N_EMBD, scale=0.02)
    # the chain: the row of each answer token points along the embedding of the token before it
    chain = (
        [token_ids(tokens, "\n")[0]]
        + [tokens.index(spell(w)) if len(w) > 1 else token_ids(tokens, w)[0] for w in ANSWER]
        + [tokens.index("<|im_end|>")]
    )
    for prev, nxt in zip(chain, chain[1:]):
        e = W["token_embd.weight"][prev].astype(np.float64)
        out[nxt] = (CHAIN_GAIN * e / np.linalg.norm(e)).astype(np.float32)
    W["output.weight"] = out
    return W


def make(path: str | Path = DEFAULT_OUT) -> dict:
    """Write the model to `path`; return what was stored as the oracle."""
    import gguf
    from gguf.quants import dequantize, quantize

    Q8 = gguf.GGMLQuantizationType.Q8_0
    tokens, types, merges = vocabulary()
    W = build_weights(tokens)
    stored: dict[str, np.ndarray] = {}  # what the file holds: Q8_0 bytes or float32
    ref: dict[str, np.ndarray] = {}  # what the oracle multiplies with: float64
    for name, arr in W.items():
        if arr.ndim == 2:
            stored[name] = quantize(arr, Q8)
            ref[name] = dequantize(stored[name], Q8).astype(np.float64).reshape(arr.shape)
        else:
            stored[name] = arr
            ref[name] = arr.astype(np.float64)

    prompt = prompt_ids(tokens)
    eos = tokens.index("<|im_end|>")
    answer, first_logits, margin = greedy(ref, prompt, eos)
    want = [tokens.index(spell(w)) if len(w) > 1 else token_ids(tokens, w)[0] for w in ANSWER] + [eos]
    if answer != want:
        raise SystemExit(f"make_selftest_model: greedy answer {answer} is not {want}; retune the weights")
    if margin < MIN_MARGIN:
        raise SystemExit(f"make_selftest_model: smallest greedy margin {margin:.3f} < {MIN_MARGIN}")

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("llambda-selftest")
    w.add_description(
        "Seeded random-weight model for Llambda's --self-test; answers 'ping' with "
        "'Hello from Llambda!'. Made by packaging/make_selftest_model.py."
    )
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_vocab_size(len(tokens))
    w.add_file_type(7)  # mostly Q8_0
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)
    w.add_string("llambda.selftest.question", QUESTION)
    w.add_string("llambda.selftest.answer", "".join(ANSWER))
    w.add_array("llambda.selftest.prompt_tokens", [int(t) for t in prompt])
    w.add_array("llambda.selftest.answer_tokens", [int(t) for t in answer])
    w.add_array("llambda.selftest.logits", [float(x) for x in first_logits.astype(np.float32)])
    w.add_float32("llambda.selftest.margin", float(margin))
    for name, arr in stored.items():
        if arr.dtype == np.uint8:
            w.add_tensor(name, arr, raw_dtype=Q8)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {"prompt_tokens": prompt, "answer_tokens": answer, "logits": first_logits, "margin": margin}


# ---- a vocabulary-only SentencePiece file: the bundle's sentencepiece library at work ---------

SPM_DEFAULT_OUT = DEFAULT_OUT.with_name("tiny-spm.gguf")
SPM_WORDS = ["\u2581Hello", "\u2581from", "\u2581Llambda"]
SPM_TEXT = "Hello from Llambda! ping"


def spm_vocabulary() -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, types): <unk> <s> </s>, 256 byte tokens, single characters, and each word
    of SPM_WORDS reachable by merging one character at a time onto its left part."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    chars = sorted({c for w in SPM_WORDS for c in w} | {"!"})
    pieces = chars + [w[:i] for w in SPM_WORDS for i in range(2, len(w) + 1)]
    for p in pieces:
        if p not in tokens:
            tokens.append(p)
            types.append(1)
    scores = [0.0] * 259 + [-float(i) for i in range(len(tokens) - 259)]
    return tokens, scores, types


def spm_expected_ids(tokens: list[str]) -> list[int]:
    """SPM_TEXT by construction: BOS, the three words, "!", then "▁" and "ping" as byte fallback."""
    index = {t: i for i, t in enumerate(tokens)}
    return (
        [1] + [index[w] for w in SPM_WORDS] + [index["!"], index["\u2581"]] + [index[f"<0x{b:02X}>"] for b in b"ping"]
    )


def make_spm(path: str | Path = SPM_DEFAULT_OUT) -> list[int]:
    """Write the vocabulary-only file (no tensors); return the token ids it expects for SPM_TEXT."""
    import gguf

    tokens, scores, types = spm_vocabulary()
    ids = spm_expected_ids(tokens)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("llambda-selftest-spm-vocab")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    w.add_string("llambda.selftest.text", SPM_TEXT)
    w.add_array("llambda.selftest.ids", ids)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ids


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DEFAULT_OUT
    info = make(out)
    print(f"{out}: {out.stat().st_size} bytes, answer {info['answer_tokens']}, smallest margin {info['margin']:.2f}")
    spm_out = out.with_name("tiny-spm.gguf")
    ids = make_spm(spm_out)
    print(f"{spm_out}: {spm_out.stat().st_size} bytes, {SPM_TEXT!r} -> {ids}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
