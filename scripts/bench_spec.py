"""Speculative decoding figures (docs/BENCHMARKS.md, "Speculative decoding").

    python scripts/bench_spec.py verify MODEL [--threads 2] [--reps 7]
        cost of one decoder pass over n = 1..17 tokens with every position's logits (the verify
        pass of k = n - 1 guesses) against one token, at a depth of 256 tokens in the cache.
    python scripts/bench_spec.py verify8b [--threads 2] [--reps 7]
        the same for the weight products of a Llama-3-8B-shaped model (see verify_costs_8b).
    python scripts/bench_spec.py project VERIFY.jsonl --acceptance A --gamma G
        the expected speed-up from measured verify costs (see project()).
    python scripts/bench_spec.py gen MODEL [--draft DRAFT] [--reps 3] [--max-tokens 200]
        greedy replies to the editing, summarising and chat prompts below, without speculation,
        with prompt lookup, and with DRAFT as draft model (runs interleaved, median tok/s);
        checks the replies are token for token the same.

Both print one JSON line per row after a human-readable table on stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROMPTS = {
    "edit-spelling": (
        "Correct the spelling mistakes in the following paragraph and return the whole paragraph:\n\n"
        "The comittee met on tuesday to discus the new budjet for the libary. Several members argued "
        "that the extra money should go to childrens books, while others wanted to repair the roof, "
        "which has been leaking for severel years. After a long debate, the chairman sugested a "
        "compromise: half of the money for books and half for the roof. The proposal was acepted by "
        "a large majority, and the meeting ended shortly after nine oclock."
    ),
    "edit-code": (
        "Rename the variable `lst` to `prices` in this Python function and return the whole "
        "function:\n\n"
        "def average_price(lst):\n"
        "    if not lst:\n"
        "        return 0.0\n"
        "    total = 0.0\n"
        "    for item in lst:\n"
        "        total += item\n"
        "    mean = total / len(lst)\n"
        '    print("average of", len(lst), "prices:", mean)\n'
        "    return mean\n"
    ),
    "summarise-quote": (
        "Summarise this passage in two sentences, quoting its most important sentence word for "
        "word:\n\n"
        "The town council announced on Monday that the old railway bridge will be closed for "
        "repairs from the first of March until the end of June. During the closure, buses will "
        "replace the trains between the station and the harbour every fifteen minutes. The council "
        "said that the repairs are necessary because inspectors found cracks in two of the steel "
        "beams last autumn. Residents are asked to plan their journeys in advance."
    ),
    "chat-poem": "Write a short poem about autumn leaves.",
    "chat-tips": "Give me three tips for learning a new language.",
}


def verify_costs(path: str, threads: int, reps: int, depth: int = 256, cpu: bool = False) -> list[dict]:
    import numpy as np

    from app.engine.decoder import CDecoder
    from app.gguf import open_gguf
    from app.model import config_from_gguf

    rows = []
    clock = time.process_time if cpu else time.perf_counter  # CPU time: the work, whatever the load
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        with CDecoder(f, cfg, depth + 32, n_threads=threads) as d:
            rng = np.random.default_rng(0)
            d.decode([int(t) for t in rng.integers(0, cfg.n_vocab, depth)], 0)
            sizes = [1, 2, 3, 4, 5, 7, 9, 13, 17]
            best = {n: float("inf") for n in sizes}
            for _ in range(reps):  # sizes interleaved: the load hits all alike
                for n in sizes:
                    ids = [int(t) for t in rng.integers(0, cfg.n_vocab, n)]
                    t = clock()
                    d.decode(ids, depth, all_logits=True)
                    best[n] = min(best[n], clock() - t)
            for n in sizes:
                rows.append(
                    {
                        "model": Path(path).name,
                        "threads": d.n_threads,
                        "isa": d.isa,
                        "tokens": n,
                        "k": n - 1,
                        "ms": round(best[n] * 1000, 2),
                        "clock": "cpu" if cpu else "wall",
                        "x_one": round(best[n] / best[1], 3),
                    }
                )
    return rows


# Llama 3.1 8B: one layer's matrices (Q4_K_M keeps most in Q4_K) and the output matrix (Q6_K),
# (rows, columns, count); the output matrix is timed on 16384 of its 128256 rows and scaled.
SHAPE_8B = {
    "layer": [(4096, 4096, 2), (1024, 4096, 2), (14336, 4096, 2), (4096, 14336, 1)],
    "n_layer": 32,
    "output": (128256, 4096),
    "output_rows_timed": 16384,
}


def verify_costs_8b(threads: int, reps: int, cpu: bool = False) -> list[dict]:
    """The weight products of a verify pass of n tokens on Llama-3-8B-shaped matrices (one layer,
    ~120 MB of Q4_K: memory-bound as the real model is; plus the Q6_K output matrix, which a
    verify pass applies to every position), against n = 1. Attention over the cache is left out
    (small next to the weights at short depth)."""
    import numpy as np

    from app.kernels import ThreadPool, matmul
    from app.kernels.bench import random_weights

    Q4_K, Q6_K = 12, 14
    rng = np.random.default_rng(0)
    layer = [(random_weights(Q4_K, r, c, seed=i), c, m) for i, (r, c, m) in enumerate(SHAPE_8B["layer"])]
    out_rows, n_cols = SHAPE_8B["output_rows_timed"], SHAPE_8B["output"][1]
    out_w = random_weights(Q6_K, out_rows, n_cols, seed=9)
    scale = SHAPE_8B["output"][0] / out_rows
    sizes = [1, 2, 3, 5, 9, 13, 17]
    xs = {n: [rng.standard_normal((n, c), dtype=np.float32) for _, c, _ in layer] for n in sizes}
    best = {n: [float("inf"), float("inf")] for n in sizes}
    clock = time.process_time if cpu else time.perf_counter
    with ThreadPool(threads) as pool:
        for _ in range(reps):
            for n in sizes:
                t = clock()
                for (w, c, m), x in zip(layer, xs[n]):
                    for _ in range(m):
                        matmul(pool, Q4_K, w, c, x)
                x = rng.standard_normal((n, n_cols), dtype=np.float32)
                t1 = clock()
                matmul(pool, Q6_K, out_w, n_cols, x)
                t2 = clock()
                best[n][0] = min(best[n][0], t1 - t)
                best[n][1] = min(best[n][1], t2 - t1)
        nth = pool.size
    rows = []
    one = best[1][0] * SHAPE_8B["n_layer"] + best[1][1] * scale
    for n in sizes:
        total = best[n][0] * SHAPE_8B["n_layer"] + best[n][1] * scale
        rows.append(
            {
                "model": "llama-3-8b shape (Q4_K layers, Q6_K output)",
                "threads": nth,
                "clock": "cpu" if cpu else "wall",
                "tokens": n,
                "k": n - 1,
                "ms": round(total * 1000, 1),
                "x_one": round(total / one, 3),
            }
        )
    return rows


def project(verify_rows: list[dict], acceptance: float, gamma: float) -> dict:
    """Expected speed-up of speculation from measured verify costs: for k guesses a pass yields
    E(k) = 1 + a + .. + a^k tokens (a: the chance a guess is kept) and costs c(k + 1) + gamma * k
    plain tokens (c: verify cost ratio, gamma: a guess's cost); the best k over those measured."""
    best = (1.0, 0)
    for r in verify_rows:
        k = r["k"]
        if k < 1:
            continue
        e = sum(acceptance**i for i in range(k + 1))
        best = max(best, (e / (r["x_one"] + gamma * k), k))
    return {"acceptance": acceptance, "gamma": gamma, "speedup": round(best[0], 2), "k": best[1]}


def gen(path: str, draft: str | None, reps: int, max_tokens: int, threads: int, prompts: list[str]) -> list[dict]:
    from app.engine.engine import Engine
    from app.engine.generate import Finished, GenerationRequest
    from app.engine.sampler import GREEDY

    modes = ["off", "lookup"] + (["draft"] if draft else [])
    engines = {
        m: Engine(path, n_ctx=2048, n_threads=threads, speculation=m, draft=draft if m == "draft" else None)
        for m in modes
    }
    rows = []
    try:
        for name in prompts:
            ids = engines["off"].chat_prompt([{"role": "user", "content": PROMPTS[name]}])
            req = GenerationRequest(tuple(ids), max_tokens=max_tokens, sampler=GREEDY)
            speeds = {m: [] for m in modes}
            outs, specs = {}, {}
            for _ in range(reps + 1):  # the first round warms up
                for m in modes:
                    eng = engines[m]
                    eng.session.reset()
                    fin = [e for e in eng.generate(req) if isinstance(e, Finished)][0]
                    outs[m] = fin.ids
                    specs[m] = fin.stats.spec
                    speeds[m].append(fin.stats.generation_tok_s)
            for m in modes:
                s = specs[m]
                rows.append(
                    {
                        "prompt": name,
                        "mode": m,
                        "tokens": len(outs[m]),
                        "tok_s": round(statistics.median(speeds[m][1:]), 2),
                        "speedup": round(statistics.median(speeds[m][1:]) / statistics.median(speeds["off"][1:]), 3),
                        "same": outs[m] == outs["off"],
                        "acceptance": round(s.acceptance, 3) if s else None,
                        "tokens_per_pass": round(s.tokens_per_pass, 2) if s else None,
                        "passes": s.passes if s else None,
                    }
                )
    finally:
        for e in engines.values():
            e.close()
    return rows


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("verify", "verify8b", "gen", "project"))
    p.add_argument("--acceptance", type=float, default=0.8)
    p.add_argument("--gamma", type=float, default=0.0, help="project: a guess's cost in plain tokens")
    p.add_argument("model", nargs="?")
    p.add_argument("--draft")
    p.add_argument("--cpu", action="store_true", help="verify: process CPU time instead of wall time")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--prompts", default=",".join(PROMPTS))
    a = p.parse_args()
    if a.what == "project":  # MODEL: a JSON-lines file written by verify / verify8b
        rows = [project([json.loads(x) for x in open(a.model)], a.acceptance, a.gamma)]
        print(rows[0], file=sys.stderr)
    elif a.what in ("verify", "verify8b"):
        rows = (
            verify_costs(a.model, a.threads, a.reps, cpu=a.cpu)
            if a.what == "verify"
            else verify_costs_8b(a.threads, a.reps, cpu=a.cpu)
        )
        for r in rows:
            print(f"k={r['k']:2d} ({r['tokens']:2d} tokens) {r['ms']:8.2f} ms  x{r['x_one']:.2f}", file=sys.stderr)
    else:
        rows = gen(a.model, a.draft, a.reps, a.max_tokens, a.threads, a.prompts.split(","))
        for r in rows:
            print(
                f"{r['prompt']:16s} {r['mode']:7s} {r['tokens']:4d} tok {r['tok_s']:7.2f} tok/s "
                f"x{r['speedup']:.2f} same={r['same']} acc={r['acceptance']} "
                f"tok/pass={r['tokens_per_pass']}",
                file=sys.stderr,
            )
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
