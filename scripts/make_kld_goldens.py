"""Make the fidelity goldens with llama.cpp (llama-cpp-python, `logits_all`): for each test model,
llama.cpp's base file at batch 512 and its own noise floor (the same ids at batch 1).

Run with the interpreter that has llama_cpp and numpy (the app's package is not imported, only
app/engine/perplexity.py, by path, so the files are written by the very code that reads them):

    ~/.cache/llambda-test/llama-cpp-venv/bin/python scripts/make_kld_goldens.py [NAME ...]

NAME: Q4_1 (the SmolLM2 test model), a variant type of tests/data/engine/smollm2_variants.json
(Q4_0, ..., BF16), or gemma3; none: all thirteen. Writes, under tests/data/perplexity/:

- llamacpp/<NAME>.bin: llama.cpp's base file (the format of `llambda perplexity --save-logits`):
  tests/data/perplexity/fidelity_text.txt tokenized by llama.cpp, 4 chunks of 512 tokens, the
  second half of each scored, decoded with n_batch = n_ubatch = 512 (one batch per chunk);
- llamacpp/<NAME>.short.bin: the same for one chunk of 64 tokens (31 scored positions), which
  the tests run at the reference kernel level (~30x slower than AVX2);
- llamacpp_floor.json: per model (and under "short", for the short base) and scored position, llama.cpp at batch 1 (n_batch = n_ubatch
  = 1, one token per decode, as generation runs) against that base: the KL divergence by the
  same top-k estimator the tests use (kld), whether the arg-max agrees (top1, a string of 0/1),
  the batch-1 log-probability of the next token (target_logprob); and the exact full-vocabulary
  KLD's mean beside the estimate's (kld_full_mean), which is how the estimator's error is known.

KV cache f16 on both sides (llama.cpp's default and ours). One thread: ggml splits rows between
threads, never a sum, so the logits do not depend on the thread count (the Q4_1 base made with 2
threads and with 1 is the same file, byte for byte), and on a busy machine one thread does not wait
at every barrier for a descheduled second one (batch 1 with 2 threads crawled under load).
Timing on the 2-core test machine under heavy load: SmolLM2 Q4_1, 178 s at batch 512 and 416 s
at batch 1 (one thread, ~15% of a core); idle it is a few seconds each.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "perplexity")
TEXT = os.path.join(DATA, "fidelity_text.txt")
CACHE = os.environ.get("LLAMBDA_TEST_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "llambda-test")
N_CTX, N_CHUNKS = 512, 4
SHORT_CTX = 64  # one chunk of 64 for the slow reference kernels (31 scored positions)

_spec = importlib.util.spec_from_file_location(
    "llambda_perplexity", os.path.join(ROOT, "app", "engine", "perplexity.py")
)
P = importlib.util.module_from_spec(_spec)
sys.path.insert(0, ROOT)  # for app.errors
sys.modules[_spec.name] = P
_spec.loader.exec_module(P)


def models() -> dict[str, str]:
    variants = json.load(open(os.path.join(ROOT, "tests", "data", "engine", "smollm2_variants.json")))
    gemma = json.load(open(os.path.join(ROOT, "tests", "data", "engine", "gemma3_270m_greedy.json")))
    out = {"Q4_1": os.path.join(CACHE, "SmolLM2-135M-Instruct.Q4_1.gguf")}
    for v in variants["variants"]:
        out[v["type"]] = os.path.join(CACHE, "variants", v["file"])
    out["gemma3"] = os.path.join(CACHE, gemma["model"])
    return out


def _llama(path: str, batch: int):
    from llama_cpp import Llama

    return Llama(
        model_path=path, n_ctx=N_CTX, n_batch=batch, n_ubatch=batch, logits_all=True, n_threads=1, seed=0, verbose=False
    )


def _scored_logits(llm, plan) -> list[np.ndarray]:
    out = []
    for chunk in plan.chunks:
        llm.reset()
        llm.eval(list(chunk))
        out.append(np.array(llm.scores[plan.first : plan.n_ctx - 1], dtype=np.float32))
    return out


def _vocab_hash(llm) -> str:
    toks = [llm._model.token_get_text(i) for i in range(llm.n_vocab())]
    return P.vocab_sha256(toks)


def make(name: str, path: str, n_ctx: int = N_CTX, n_chunks: int = N_CHUNKS, suffix: str = "") -> dict:
    text = open(TEXT, encoding="utf-8").read()
    t0 = time.time()
    llm = _llama(path, 512)
    add_bos = llm.metadata.get("tokenizer.ggml.add_bos_token", "false") == "true"
    ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False)
    plan = P.make_plan(ids, n_ctx, llm.token_bos() if add_bos else None, n_chunks)
    b512 = _scored_logits(llm, plan)
    n_vocab = llm.n_vocab()
    vocab_hash = _vocab_hash(llm)
    del llm
    t1 = time.time()
    scores = []
    for c, (logits, chunk) in enumerate(zip(b512, plan.chunks)):
        targets = np.asarray(chunk[plan.first + 1 :], dtype=np.int64)
        tlp, am, tid, tlogp, rest, _ = P._score_rows(logits, targets, P.TOP_K, None, None)
        scores.append(P.ChunkScores(c, tlp, am, tid, tlogp, rest, 0.0))
    os.makedirs(os.path.join(DATA, "llamacpp"), exist_ok=True)
    out = os.path.join(DATA, "llamacpp", f"{name}{suffix}.bin")
    P.write_base(
        out,
        plan,
        scores,
        n_vocab,
        vocab_hash,
        {"file": os.path.basename(path), "sha256": _sha256(path)},
        {"file": os.path.basename(TEXT), "n_tokens": len(ids)},
        "llama.cpp (llama-cpp-python 0.3.36) n_batch 512",
    )
    base = P.read_base(out)
    # the noise floor: the same ids one token per decode
    llm = _llama(path, 1)
    b1 = _scored_logits(llm, plan)
    del llm
    t2 = time.time()
    kld, kld_full, top1, tlp1 = [], [], [], []
    for c, (lo512, lo1, chunk) in enumerate(zip(b512, b1, plan.chunks)):
        targets = np.asarray(chunk[plan.first + 1 :], dtype=np.int64)
        rows = slice(c * plan.n_scored, (c + 1) * plan.n_scored)
        for r0 in range(0, plan.n_scored, 32):
            r1 = min(plan.n_scored, r0 + 32)
            p = P.log_softmax_rows(lo512[r0:r1])
            q = P.log_softmax_rows(lo1[r0:r1])
            kld_full.extend((np.exp(p) * (p - q)).sum(-1).tolist())
            kld.extend(P._kld_rows(base, slice(rows.start + r0, rows.start + r1), q).tolist())
            top1.extend((q.argmax(-1) == base.top_ids[rows.start + r0 : rows.start + r1, 0]).tolist())
            tlp1.extend(q[np.arange(r1 - r0), targets[r0:r1]].tolist())
    kld, kld_full = np.array(kld), np.array(kld_full)
    s = P.summarize(np.array(tlp1), base.target_logprob.astype(np.float64), kld, np.array(top1))
    print(
        f"{name}{suffix}: floor KLD {s.kld_mean:.6f} (full {kld_full.mean():.6f}), top-1 {100 * s.top1:.2f}%, "
        f"PPL b512 {s.base_ppl:.4f} b1 {s.ppl:.4f} ratio {s.ppl_ratio:.5f}; "
        f"{t1 - t0:.0f} s batch 512, {t2 - t1:.0f} s batch 1",
        file=sys.stderr,
    )
    return {
        "file": os.path.basename(path),
        "n_positions": s.n_positions,
        "kld": [float(f"{v:.4g}") for v in kld],
        "kld_mean": s.kld_mean,
        "kld_full_mean": float(kld_full.mean()),
        "kld_full_max_shortfall": float((kld_full - kld).max()),
        "top1": "".join("1" if t else "0" for t in top1),
        "target_logprob": [round(v, 6) for v in tlp1],
        "summary": s.as_dict(),
        "seconds_batch1": round(t2 - t1, 1),
    }


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(names: list[str]) -> None:
    table = models()
    names = names or list(table)
    floor_path = os.environ.get("LLAMBDA_KLD_FLOOR") or os.path.join(DATA, "llamacpp_floor.json")
    floors = (
        json.load(open(floor_path))
        if os.path.exists(floor_path)
        else {
            "text": os.path.basename(TEXT),
            "n_ctx": N_CTX,
            "n_chunks": N_CHUNKS,
            "k": P.TOP_K,
            "kv": "f16",
            "models": {},
        }
    )
    for name in names:
        if name not in table:
            raise SystemExit(f"unknown model {name!r}; one of {', '.join(table)}")
        floors["models"][name] = make(name, table[name])
        floors["models"][name]["short"] = make(name, table[name], SHORT_CTX, 1, ".short")
        tmp = floor_path + ".part"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(floors, f, separators=(",", ":"))
        os.replace(tmp, floor_path)


if __name__ == "__main__":
    main(sys.argv[1:])
