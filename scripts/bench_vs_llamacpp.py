"""Llambda against llama.cpp on the same GGUF file, same thread counts, in one run: prints
tokens/s of both and the ratio (ours / llama.cpp) for prompt processing and generation.

    python scripts/bench_vs_llamacpp.py MODEL.gguf [--threads 1,2] [--pp 512] [--tg 128] [--reps 3] [--depth D]
        [--llama-python /work/llvenv/bin/python] [--json]

Ours runs as `python -m app.engine.cli bench` (what `llambda bench` runs); llama.cpp runs through
llama-cpp-python in its own interpreter with the same protocol as llama-bench: ppN decodes N
random tokens as one batch from an empty cache, tgN decodes N tokens one call each from an empty
cache (or, with --depth D, both start after D random tokens in the cache); one warm-up run, then
the mean of `reps` runs. The two alternate per thread count so that
both see the same machine load. Also prints the generation ceiling: weight bytes read per token
over the machine's read bandwidth.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LLAMA_BENCH = r"""
import json, statistics, sys, time, random
import llama_cpp
from llama_cpp import Llama
path, nt, pp, tg, reps, depth = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                 int(sys.argv[5]), int(sys.argv[6]))
llm = Llama(model_path=path, n_ctx=depth + max(pp, tg) + 16, n_batch=max(pp, 512), n_ubatch=pp,
            n_threads=nt, n_threads_batch=nt, logits_all=False, verbose=False, seed=0)
rng = random.Random(0)
prefix = [rng.randrange(llm.n_vocab()) for _ in range(depth)]
rows = []
for kind, n in (("pp", pp), ("tg", tg)):
    ids = [rng.randrange(llm.n_vocab()) for _ in range(n)]
    runs, cpu_runs = [], []
    for r in range(reps + 1):
        llm.reset()
        if depth:   # llama-bench's -d: the prefix in the cache, untimed
            llm._ctx.kv_cache_seq_rm(-1, 0, -1)
            llm.eval(prefix)
        t, c = time.perf_counter(), time.process_time()
        if kind == "pp":
            llm.eval(ids)
        else:
            for tok in ids:
                llm.eval([tok])
        if r:
            runs.append(n / (time.perf_counter() - t))
            cpu_runs.append(n / max(time.process_time() - c, 1e-9))
    rows.append({"threads": nt, "test": f"{kind}{n}", "tok_s": round(statistics.mean(runs), 2),
                 "stdev": round(statistics.stdev(runs), 2) if len(runs) > 1 else 0.0,
                 "tok_per_cpu_s": round(statistics.mean(cpu_runs), 2)})
print(json.dumps(rows))
"""


def ours(model: str, nt: int, pp: int, tg: int, reps: int, depth: int) -> list[dict]:
    cmd = [
        sys.executable,
        "-m",
        "app.engine.cli",
        "bench",
        model,
        "--threads",
        str(nt),
        "--pp",
        str(pp),
        "--tg",
        str(tg),
        "--reps",
        str(reps),
        "--depth",
        str(depth),
        "--json",
    ]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def llamacpp(python: str, model: str, nt: int, pp: int, tg: int, reps: int, depth: int) -> list[dict]:
    cmd = [python, "-c", LLAMA_BENCH, model, str(nt), str(pp), str(tg), str(reps), str(depth)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def ceiling(model: str, nt: int) -> tuple[float, float]:
    """(weight bytes read per generated token, read bandwidth in bytes/s with nt threads)."""
    sys.path.insert(0, ROOT)
    from app import kernels
    from app.gguf import open_gguf
    from app.model import config_from_gguf

    with open_gguf(model) as f:
        cfg = config_from_gguf(f)
        per_token = sum(t.n_bytes for n, t in f.tensors.items() if n != "token_embd.weight")
        if cfg.tied_output:
            per_token += f.tensors["token_embd.weight"].n_bytes
    with kernels.ThreadPool(nt) as pool:
        bw = kernels.read_bandwidth(pool)
    return per_token, bw


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--depth", type=int, default=0, help="tokens in the cache before each test, both engines (llama-bench's -d)"
    )
    ap.add_argument("--llama-python", default="/work/llvenv/bin/python")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    results = []
    for nt in threads:
        mine = {r["test"]: r for r in ours(a.model, nt, a.pp, a.tg, a.reps, a.depth)}
        theirs = {r["test"]: r for r in llamacpp(a.llama_python, a.model, nt, a.pp, a.tg, a.reps, a.depth)}
        per_token, bw = ceiling(a.model, nt)
        for test in mine:
            m, t = mine[test], theirs[test]
            row = {
                "threads": nt,
                "test": test + (f"@d{a.depth}" if a.depth else ""),
                "llambda_tok_s": m["tok_s"],
                "llambda_stdev": m["stdev"],
                "llamacpp_tok_s": t["tok_s"],
                "llamacpp_stdev": t["stdev"],
                "ratio": round(m["tok_s"] / t["tok_s"], 3),
                "llambda_tok_per_cpu_s": m["tok_per_cpu_s"],
                "llamacpp_tok_per_cpu_s": t["tok_per_cpu_s"],
                "cpu_ratio": round(m["tok_per_cpu_s"] / t["tok_per_cpu_s"], 3),
                "isa": m.get("isa", ""),
            }
            if test.startswith("tg") and not a.depth:
                row["ceiling_tok_s"] = round(bw / per_token, 1)
                row["llambda_of_ceiling"] = round(m["tok_s"] / (bw / per_token), 3)
            results.append(row)
    if a.json:
        print(json.dumps(results))
        return 0
    print(
        f"model: {a.model} ({os.path.getsize(a.model) / 2**20:.1f} MiB); CPU: {cpu_name()}; "
        f"{os.cpu_count()} logical CPUs"
    )
    try:
        load = " load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = ""
    print(f"tok/s = wall clock; tok/cpu-s = per second of process CPU time (robust to other load);{load}")
    print(
        f"{'threads':>7} {'test':>11} {'llambda':>10} {'llama.cpp':>10} {'ratio':>6} "
        f"{'tok/cpu-s':>10} {'llama.cpp':>10} {'ratio':>6} {'ceiling':>8} {'of ceil':>8}  isa"
    )
    for r in results:
        ceil_s = (
            f"{r['ceiling_tok_s']:>8.1f} {100 * r['llambda_of_ceiling']:>7.0f}%"
            if "ceiling_tok_s" in r
            else f"{'':>8} {'':>8}"
        )
        print(
            f"{r['threads']:>7} {r['test']:>11} {r['llambda_tok_s']:>10.2f} {r['llamacpp_tok_s']:>10.2f} "
            f"{r['ratio']:>6.2f} {r['llambda_tok_per_cpu_s']:>10.2f} {r['llamacpp_tok_per_cpu_s']:>10.2f} "
            f"{r['cpu_ratio']:>6.2f} {ceil_s}  {r['isa']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
