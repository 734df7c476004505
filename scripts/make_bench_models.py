#!/usr/bin/env python3
"""Random-weight GGUF files with the exact shapes of real 1-8B models, for speed benchmarks.

    python scripts/make_bench_models.py [--shapes llama3.2-1b,qwen2.5-1.5b,llama3.1-8b]
        [--types Q4_0,Q4_K_M,Q5_K_M,Q6_K,Q8_0,IQ4_XS] [--quantize PATH/llama-quantize] [--keep-f16]

Speed does not depend on the weights' values, only on the shapes and the tensor types, and the
real files cannot be downloaded here. Each shape is written as an F16 GGUF through the `gguf`
package (hidden size, layers, heads, KV heads, FFN width, rope base and Llama 3 rope scaling
factors, QKV biases for Qwen2.5, Phi-3's fused QKV and gate/up matrices, Gemma 2's head size,
post-norms, soft-caps and window, tied or separate output, the real vocabulary size), then
quantized by llama.cpp's own `llama-quantize` (scripts/build_llamacpp.sh builds it), so that
every quantized file has the tensor types a real file of that type has (Q4_K_M's Q6_K
ffn_down/attn_v/output, for instance).

Weights are random but sane: matrices are normal(0, 0.02) values (drawn once into a pool, then
taken from it at a random offset per tensor, which is as good for timing and much faster than
drawing 8 billion numbers), norms are 1.0, biases normal(0, 0.02); the network's activations
stay finite. The F16 file is written one tensor at a time (at most ~1 GB in memory for the
8B's embedding) and deleted once its quantized children exist (--keep-f16 keeps it): an 8B F16
file is 16 GB. Requantizing from F16 rather than from a Q8_0 written by gguf.quants keeps the
quantized files what llama-quantize makes from a real F16/BF16 checkpoint, and numpy Q8_0
quantization would be slower than writing the F16 bytes.

Tokenizer and chat template are copied from the SmolLM2 test model (tests/models.py fetches it;
49152 tokens). The token list is padded to the real model's vocabulary size (128256 for Llama 3,
151936 for Qwen2.5, 256000 for Gemma 2) with distinct unused tokens (GGUF token type UNUSED,
never produced by the tokenizer), or cut to it (32064 for Phi-3: the first tokens and the merges
among them), so that the embedding and output matrices have the real size: at 1B they are a
large share of the bytes read per generated token. (The shapes' own shapes, not their tokenizers:
a Gemma or Phi-3 prompt of the same text would be a different number of tokens.)

Files go to $LLAMBDA_BENCH_CACHE/models (default ~/.cache/llambda-bench/models), named
<shape>.<TYPE>.gguf. Existing files are kept (delete them to remake).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TYPES = ("Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "IQ4_XS")
LLAMACPP_VERSION = "0.3.36"
TYPE_UNUSED = 5  # GGUF tokenizer.ggml.token_type


@dataclass(frozen=True)
class Shape:
    name: str
    arch: str  # "llama", "qwen2", "phi3" or "gemma2"
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    rope_base: float
    eps: float
    n_ctx: int
    tied: bool
    qkv_bias: bool = False
    # Llama 3.x rope scaling ("llama3"): factor, low/high frequency factors, original context
    llama3_rope: tuple[float, float, float, int] | None = None
    title: str = ""
    head_size: int = 0  # when not n_embd / n_head (Gemma 2: 256): the key_length/value_length keys
    fused: bool = False  # Phi-3: one attn_qkv (Q, K, V rows) and one ffn_up of gate then up rows
    post_norms: bool = False  # Gemma 2: post_attention_norm and post_ffw_norm in every layer
    softcaps: tuple[float, float] | None = None  # Gemma 2: attention and final logit soft-caps
    sliding_window: int = 0  # Gemma 2: the window of every other layer

    @property
    def head_dim(self) -> int:
        return self.head_size or self.n_embd // self.n_head


SHAPES = {
    s.name: s
    for s in (
        Shape(
            "llama3.2-1b",
            "llama",
            2048,
            16,
            32,
            8,
            8192,
            128256,
            500000.0,
            1e-5,
            131072,
            tied=True,
            llama3_rope=(32.0, 1.0, 4.0, 8192),
            title="Llama 3.2 1B",
        ),
        Shape(
            "llama3.2-3b",
            "llama",
            3072,
            28,
            24,
            8,
            8192,
            128256,
            500000.0,
            1e-5,
            131072,
            tied=True,
            llama3_rope=(32.0, 1.0, 4.0, 8192),
            title="Llama 3.2 3B",
        ),
        Shape(
            "qwen2.5-1.5b",
            "qwen2",
            1536,
            28,
            12,
            2,
            8960,
            151936,
            1000000.0,
            1e-6,
            32768,
            tied=True,
            qkv_bias=True,
            title="Qwen2.5 1.5B",
        ),
        Shape(
            "llama3.1-8b",
            "llama",
            4096,
            32,
            32,
            8,
            14336,
            128256,
            500000.0,
            1e-5,
            131072,
            tied=False,
            llama3_rope=(8.0, 1.0, 4.0, 8192),
            title="Llama 3.1 8B",
        ),
        # multi-head attention (32 KV heads of 96), fused QKV and gate/up matrices; Phi-3 mini's
        # own 32064-token vocabulary (the source tokenizer cut to it)
        Shape(
            "phi3-mini",
            "phi3",
            3072,
            32,
            32,
            32,
            8192,
            32064,
            10000.0,
            1e-5,
            4096,
            tied=False,
            fused=True,
            # not "Phi-3": llama.cpp gives a model whose name holds "phi-3" or "phi3" Phi-3's own
            # token attributes, and stops at a tokenizer without "</s>", "<unk>" and "<s>"
            title="Phi 3 mini",
        ),
        # head size 256 from 2304 wide, groups of 2 query heads per KV head, post-norms, soft-caps
        Shape(
            "gemma2-2b",
            "gemma2",
            2304,
            26,
            8,
            4,
            9216,
            256000,
            10000.0,
            1e-6,
            8192,
            tied=True,
            head_size=256,
            post_norms=True,
            softcaps=(50.0, 30.0),
            sliding_window=4096,
            title="Gemma 2 2B",
        ),
        # for tests: a few MB, the SmolLM2 vocabulary unpadded
        Shape("tiny", "llama", 128, 2, 4, 2, 256, 49152, 10000.0, 1e-5, 2048, tied=True, title="tiny"),
        Shape(
            "tiny-qwen2",
            "qwen2",
            128,
            2,
            4,
            2,
            256,
            49152,
            1000000.0,
            1e-6,
            2048,
            tied=False,
            qkv_bias=True,
            title="tiny qwen2",
        ),
    )
}
# tiny twins of Phi-3 mini and Gemma 2 2B for tests: their layout and options at a few MB
_TINY = dict(n_embd=128, n_layer=2, n_head=4, n_ff=256, n_ctx=2048, title="")
SHAPES["tiny-phi3"] = replace(SHAPES["phi3-mini"], name="tiny-phi3", n_head_kv=4, n_vocab=40000, **_TINY)
SHAPES["tiny-gemma2"] = replace(
    SHAPES["gemma2-2b"], name="tiny-gemma2", n_head_kv=2, n_vocab=49152, head_size=48, sliding_window=64, **_TINY
)
DEFAULT_SHAPES = ("llama3.2-1b", "qwen2.5-1.5b", "llama3.1-8b")


def bench_cache() -> Path:
    return Path(os.environ.get("LLAMBDA_BENCH_CACHE") or Path.home() / ".cache" / "llambda-bench")


def models_dir() -> Path:
    return bench_cache() / "models"


def model_path(shape: str, qtype: str, folder: Path | None = None) -> Path:
    return (folder or models_dir()) / f"{shape}.{qtype}.gguf"


def default_quantizer() -> Path | None:
    base = bench_cache() / "llama.cpp" / LLAMACPP_VERSION
    for level in ("avx2", "native"):
        p = base / level / "bin" / "llama-quantize"
        if p.exists():
            return p
    return None


def smollm2_source() -> Path:
    cache = Path(os.environ.get("LLAMBDA_TEST_CACHE") or Path.home() / ".cache" / "llambda-test")
    return cache / "SmolLM2-135M-Instruct.Q4_1.gguf"


def read_tokenizer(path: Path) -> dict:
    """The tokenizer and chat template of a GGUF file, through our own reader."""
    from app.gguf import open_gguf

    with open_gguf(str(path)) as f:
        md = f.metadata
        return {
            "model": md.string("tokenizer.ggml.model"),
            "pre": md.string("tokenizer.ggml.pre", None),
            "tokens": md.string_array("tokenizer.ggml.tokens"),
            "types": [int(x) for x in md.numeric_array("tokenizer.ggml.token_type", "int")],
            "merges": md.string_array("tokenizer.ggml.merges"),
            "bos": md.get("tokenizer.ggml.bos_token_id"),
            "eos": md.get("tokenizer.ggml.eos_token_id"),
            "unk": md.get("tokenizer.ggml.unknown_token_id"),
            "pad": md.get("tokenizer.ggml.padding_token_id"),
            "add_bos": md.get("tokenizer.ggml.add_bos_token"),
            "template": md.string("tokenizer.chat_template", None),
        }


def padded_vocab(tok: dict, n_vocab: int) -> tuple[list[str], list[int]]:
    tokens, types = list(tok["tokens"]), list(tok["types"])
    if n_vocab < len(tokens):
        raise SystemExit(f"vocabulary {n_vocab} is smaller than the source tokenizer's {len(tokens)}")
    for i in range(len(tokens), n_vocab):
        tokens.append(f"<|llambda_unused_{i}|>")
        types.append(TYPE_UNUSED)
    return tokens, types


def cut_vocab(tok: dict, n_vocab: int) -> dict:
    """The tokenizer cut to its first n_vocab tokens, keeping only the merges whose parts and
    result are among them (byte-level BPE numbers tokens in merge order, so what is left still
    tokenizes any text: the bytes are among the first tokens). The special tokens must stay."""
    keep = set(tok["tokens"][:n_vocab])
    for key in ("bos", "eos", "unk", "pad"):
        if tok[key] is not None and int(tok[key]) >= n_vocab:
            raise SystemExit(f"the source tokenizer's {key} token {tok[key]} is not among the first {n_vocab}")
    merges = []
    for m in tok["merges"]:
        a, _, b = m.partition(" ")
        if a in keep and b in keep and a + b in keep:
            merges.append(m)
    return {**tok, "tokens": tok["tokens"][:n_vocab], "types": tok["types"][:n_vocab], "merges": merges}


def llama3_rope_factors(s: Shape) -> np.ndarray:
    """Per-pair frequency divisors of Llama 3.1's rope scaling (rope_freqs.weight): pairs whose
    wavelength is short keep their frequency, long ones are divided by `factor`, the ones between
    are interpolated smoothly."""
    factor, low, high, orig = s.llama3_rope
    dim = s.head_dim
    out = []
    for i in range(0, dim, 2):
        freq = 1.0 / s.rope_base ** (i / dim)
        wavelen = 2 * math.pi / freq
        if wavelen < orig / high:
            out.append(1.0)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


def tensor_plan(s: Shape) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, numpy shape = (rows, cols), kind) in file order; kind: matrix, norm, bias, rope."""
    hd = s.head_dim
    q, kv = s.n_head * hd, s.n_head_kv * hd
    plan = [("token_embd.weight", (s.n_vocab, s.n_embd), "matrix")]
    if s.llama3_rope:
        plan.append(("rope_freqs.weight", (hd // 2,), "rope"))
    for i in range(s.n_layer):
        b = f"blk.{i}."
        plan.append((b + "attn_norm.weight", (s.n_embd,), "norm"))
        if s.fused:
            plan.append((b + "attn_qkv.weight", (q + 2 * kv, s.n_embd), "matrix"))
        else:
            plan += [
                (b + "attn_q.weight", (q, s.n_embd), "matrix"),
                (b + "attn_k.weight", (kv, s.n_embd), "matrix"),
                (b + "attn_v.weight", (kv, s.n_embd), "matrix"),
            ]
        if s.qkv_bias:
            plan += [
                (b + "attn_q.bias", (q,), "bias"),
                (b + "attn_k.bias", (kv,), "bias"),
                (b + "attn_v.bias", (kv,), "bias"),
            ]
        plan.append((b + "attn_output.weight", (s.n_embd, q), "matrix"))
        if s.post_norms:
            plan.append((b + "post_attention_norm.weight", (s.n_embd,), "norm"))
        plan.append((b + "ffn_norm.weight", (s.n_embd,), "norm"))
        if s.fused:
            plan.append((b + "ffn_up.weight", (2 * s.n_ff, s.n_embd), "matrix"))
        else:
            plan += [
                (b + "ffn_gate.weight", (s.n_ff, s.n_embd), "matrix"),
                (b + "ffn_up.weight", (s.n_ff, s.n_embd), "matrix"),
            ]
        plan.append((b + "ffn_down.weight", (s.n_embd, s.n_ff), "matrix"))
        if s.post_norms:
            plan.append((b + "post_ffw_norm.weight", (s.n_embd,), "norm"))
    plan.append(("output_norm.weight", (s.n_embd,), "norm"))
    if not s.tied:
        plan.append(("output.weight", (s.n_vocab, s.n_embd), "matrix"))
    return plan


class _Pool:
    """normal(0, 0.02) F16 values drawn once; each tensor takes them from a random offset."""

    def __init__(self, rng: np.random.Generator, size: int):
        self.rng = rng
        self.values = (rng.standard_normal(size, dtype=np.float32) * 0.02).astype(np.float16)

    def take(self, n: int) -> np.ndarray:
        parts, left = [], n
        while left:
            off = int(self.rng.integers(0, len(self.values)))
            k = min(left, len(self.values) - off)
            parts.append(self.values[off : off + k])
            left -= k
        return parts[0].copy() if len(parts) == 1 else np.concatenate(parts)


def write_f16(s: Shape, path: Path, tok: dict, seed: int = 0, log=print) -> Path:
    """Write shape `s` as an F16 GGUF at `path`, one tensor at a time."""
    import gguf

    rng = np.random.default_rng(seed)
    plan = tensor_plan(s)
    biggest = max(math.prod(shp) for _, shp, kind in plan if kind == "matrix")
    pool = _Pool(rng, min(biggest, 1 << 26))
    tmp = path.with_name(path.name + ".part")
    path.parent.mkdir(parents=True, exist_ok=True)

    w = gguf.GGUFWriter(str(tmp), s.arch)
    w.add_name(f"{s.title} shape, random weights (Llambda benchmark)")
    w.add_type("model")
    w.add_context_length(s.n_ctx)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(s.n_layer)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_rope_dimension_count(s.head_dim)
    w.add_rope_freq_base(s.rope_base)
    w.add_layer_norm_rms_eps(s.eps)
    if s.head_size:
        w.add_key_length(s.head_size)
        w.add_value_length(s.head_size)
    if s.softcaps:
        w.add_attn_logit_softcapping(s.softcaps[0])
        w.add_final_logit_softcapping(s.softcaps[1])
    if s.sliding_window:
        w.add_sliding_window(s.sliding_window)
    w.add_vocab_size(s.n_vocab)
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16))
    if s.n_vocab < len(tok["tokens"]):
        tok = cut_vocab(tok, s.n_vocab)
    tokens, types = padded_vocab(tok, s.n_vocab)
    w.add_tokenizer_model(tok["model"])
    if tok["pre"]:
        w.add_tokenizer_pre(tok["pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    if tok["merges"]:
        w.add_token_merges(tok["merges"])
    for key, fn in (
        ("bos", w.add_bos_token_id),
        ("eos", w.add_eos_token_id),
        ("unk", w.add_unk_token_id),
        ("pad", w.add_pad_token_id),
    ):
        if tok[key] is not None:
            fn(int(tok[key]))
    if tok["add_bos"] is not None:
        w.add_add_bos_token(bool(tok["add_bos"]))
    if tok["template"]:
        w.add_chat_template(tok["template"])

    for name, shp, kind in plan:
        dtype = np.float16 if kind == "matrix" else np.float32
        w.add_tensor_info(name, shp, np.dtype(dtype), math.prod(shp) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rope = llama3_rope_factors(s) if s.llama3_rope else None
    t0 = time.monotonic()
    for name, shp, kind in plan:
        n = math.prod(shp)
        if kind == "matrix":
            data = pool.take(n).reshape(shp)
        elif kind == "norm":
            data = np.ones(shp, dtype=np.float32)
        elif kind == "bias":
            data = (rng.standard_normal(n, dtype=np.float32) * 0.02).reshape(shp)
        else:
            data = rope
        w.write_tensor_data(data)
        del data
    w.close()
    tmp.replace(path)
    log(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB, {time.monotonic() - t0:.0f} s)")
    return path


# llama.cpp's quantizer through llama-cpp-python (the same code as llama-quantize), for a machine
# that has llama-cpp-python but no llama-quantize binary: --quantize python:/path/to/python
PY_QUANTIZE = r"""
import sys, llama_cpp
src, dst, qtype, nt = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = getattr(llama_cpp, "LLAMA_FTYPE_MOSTLY_" + qtype)
params.nthread = nt
sys.exit(1 if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), params) != 0 else 0)
"""


def quantize(quantizer: Path | str, src: Path, dst: Path, qtype: str, threads: int, log=print) -> Path:
    tmp = dst.with_name(dst.name + ".part")
    t0 = time.monotonic()
    q = str(quantizer)
    cmd = ([q[len("python:") :], "-c", PY_QUANTIZE] if q.startswith("python:") else [q]) + [
        str(src),
        str(tmp),
        qtype,
        str(threads),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"llama-quantize {qtype} failed: " + " | ".join(tail))
    tmp.replace(dst)
    log(f"made {dst} ({dst.stat().st_size / 1e9:.2f} GB, {time.monotonic() - t0:.0f} s)")
    return dst


def make_shape(
    shape: str,
    types: list[str],
    folder: Path,
    quantizer: Path | None,
    tok: dict,
    keep_f16: bool = False,
    threads: int = 2,
    log=print,
) -> list[Path]:
    """The quantized files of one shape (made if missing); F16 only when types is ["F16"]."""
    s = SHAPES[shape]
    f16 = model_path(shape, "F16", folder)
    want = [t for t in types if t != "F16"]
    todo = [t for t in want if not model_path(shape, t, folder).exists()]
    if todo and quantizer is None:
        raise SystemExit("no llama-quantize: run scripts/build_llamacpp.sh, or pass --quantize PATH")
    if ("F16" in types or todo) and not f16.exists():
        write_f16(s, f16, tok, log=log)
    made = []
    for t in todo:
        made.append(quantize(quantizer, f16, model_path(shape, t, folder), t, threads, log=log))
    if f16.exists() and "F16" not in types and not keep_f16:
        f16.unlink()
        log(f"removed {f16}")
    return [model_path(shape, t, folder) for t in types]


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--shapes",
        type=_csv,
        default=list(DEFAULT_SHAPES),
        help=f"comma-separated, of: {', '.join(SHAPES)} (default: {','.join(DEFAULT_SHAPES)})",
    )
    ap.add_argument(
        "--types",
        type=_csv,
        default=list(TYPES),
        help=f"comma-separated llama-quantize types, or F16 (default: {','.join(TYPES)})",
    )
    ap.add_argument("--out", type=Path, default=None, help="folder (default: $LLAMBDA_BENCH_CACHE/models)")
    ap.add_argument(
        "--quantize",
        default=None,
        help="llama-quantize binary (default: the bench cache's avx2 or native build), or "
        "python:INTERPRETER to use llama-cpp-python's llama_model_quantize",
    )
    ap.add_argument(
        "--tokenizer-from",
        type=Path,
        default=None,
        help="GGUF whose tokenizer and template to copy (default: the SmolLM2 test model)",
    )
    ap.add_argument("--threads", type=int, default=2, help="llama-quantize threads")
    ap.add_argument("--keep-f16", action="store_true", help="keep the F16 file after quantizing")
    a = ap.parse_args(argv)
    bad = [s for s in a.shapes if s not in SHAPES]
    if bad:
        ap.error(f"unknown shape(s) {', '.join(bad)}; known: {', '.join(SHAPES)}")
    bad = [t for t in a.types if t != "F16" and t not in TYPES]
    if bad:
        ap.error(f"unknown type(s) {', '.join(bad)}; known: F16, {', '.join(TYPES)}")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    src = a.tokenizer_from or smollm2_source()
    if not src.exists():
        print(f"make_bench_models: {src} is missing (run the tests once, or tests/models.py)", file=sys.stderr)
        return 1
    tok = read_tokenizer(src)
    quantizer = a.quantize or default_quantizer()
    folder = a.out or models_dir()
    free = shutil.disk_usage(
        folder if folder.exists() else folder.parent if folder.parent.exists() else Path.home()
    ).free
    print(f"writing to {folder} ({free / 1e9:.0f} GB free); quantizer: {quantizer}", file=sys.stderr)

    def log(m: str) -> None:
        print(m, file=sys.stderr, flush=True)

    try:
        for shape in a.shapes:
            make_shape(shape, a.types, folder, quantizer, tok, keep_f16=a.keep_f16, threads=a.threads, log=log)
    except RuntimeError as e:
        print(f"make_bench_models: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
