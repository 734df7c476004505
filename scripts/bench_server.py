"""Generation speed through `llambda serve` against the engine called directly (what
`llambda generate` runs), one client, interleaved run by run so every side sees the same load:

    python scripts/bench_server.py MODEL.gguf [--tokens 128] [--reps 5] [--threads 0] [--no-stream]
        [--compare ROOT] [--json]

Direct: `Engine.generate` in this process, end-of-turn tokens ignored so every run makes
--tokens tokens. Server: `llambda serve` in its own process (as other programs use it), the same
request through the official `openai` client, streamed over loopback. `--compare ROOT` starts a
second server from another checkout (e.g. the main branch's, for a before/after) and takes its
turn in every round. Reports per side the median generation tokens/s the engine measured, for a
server also what the client saw (tokens over the time from its first to its last piece), the
chunks per stream, and where the CPU went per run (Linux: each thread's schedstat): the
client's thread, the server's event-loop thread, its engine threads (owner and kernel pool).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

PROMPT = "Write a long story about a lighthouse keeper and the sea."


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds so far of the threads of `pid`, by role: "loop" (the main thread, where
    uvicorn runs) and "engine" (the others: the engine owner and the kernel pool; Python does
    not name its threads for the OS). Empty where /proc has no schedstat."""
    out = {"loop": 0.0, "engine": 0.0}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        out["loop" if int(tid) == pid else "engine"] += ns / 1e9
    return out


class Server:
    """`llambda serve` from checkout `root`, in its own process, asked through the openai client."""

    def __init__(self, name: str, root: str, model: str, threads: int):
        import openai

        self.name = name
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli",
                "serve",
                model,
                "--port",
                "0",
                "--ctx",
                "1024",
                "--threads",
                str(threads),
            ],
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        if "http://" not in line:
            self.proc.kill()
            raise SystemExit(f"the server from {root} did not start: {line.strip()}")
        base = line.split("http://", 1)[1].split()[0]
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()  # keep its pipe drained
        self.client = openai.OpenAI(base_url="http://" + base, api_key="x", max_retries=0)
        self.engine_rates: list[float] = []
        self.client_rates: list[float] = []
        self.chunks: list[int] = []
        self.cpu: list[dict[str, float]] = []  # per run: loop, engine, client seconds

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(30)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument(
        "--no-stream",
        dest="stream",
        action="store_false",
        help="one answer per request instead of a stream (the client's 'saw' rate then includes the prompt)",
    )
    p.add_argument("--compare", metavar="ROOT", help="also a server from this checkout, in every round")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    from app.engine.engine import Engine
    from app.engine.generate import Finished, GenerationRequest
    from app.engine.sampler import SamplerSettings

    eng = Engine(args.model, n_ctx=1024, n_threads=args.threads)
    servers = [Server("server", ROOT, args.model, args.threads)]
    if args.compare:
        servers.append(Server("compare", os.path.abspath(args.compare), args.model, args.threads))
    messages = [{"role": "user", "content": PROMPT}]

    def direct(seed: int) -> float:
        req = GenerationRequest(
            tuple(eng.chat_prompt(messages)),
            max_tokens=args.tokens,
            sampler=SamplerSettings(seed=seed),
            stop_on_eog=False,
        )
        fin = [ev for ev in eng.generate(req) if isinstance(ev, Finished)][0]
        assert len(fin.ids) == args.tokens
        return fin.stats.generation_tok_s

    def served_whole(s: Server, seed: int) -> tuple[float, float, int]:
        t0 = time.perf_counter()
        r = s.client.chat.completions.create(
            model="bench", messages=messages, max_tokens=args.tokens, seed=seed, extra_body={"ignore_eos": True}
        )
        assert r.usage is not None and r.usage.completion_tokens == args.tokens
        extra = r.model_extra or {}
        return extra["timings"]["generation_tok_s"], args.tokens / (time.perf_counter() - t0), 1

    def served_stream(s: Server, seed: int) -> tuple[float, float, int]:
        stream = s.client.chat.completions.create(
            model="bench",
            messages=messages,
            max_tokens=args.tokens,
            seed=seed,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        first = last = None
        engine_rate, n, chunks = 0.0, 0, 0
        for chunk in stream:
            now = time.perf_counter()
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or now
                last = now
                chunks += 1
            if chunk.choices and chunk.choices[0].finish_reason:
                engine_rate = (chunk.model_extra or {})["timings"]["generation_tok_s"]
            if chunk.usage:
                n = chunk.usage.completion_tokens
        assert n == args.tokens and first is not None and last is not None
        # the first piece is the first token alone (the engine's first run is one token)
        return engine_rate, (n - 1) / (last - first), chunks

    def served(s: Server, seed: int) -> None:
        cpu0, client0 = thread_cpu_s(s.proc.pid), time.thread_time()
        engine_rate, client_rate, n_chunks = (served_stream if args.stream else served_whole)(s, seed)
        cpu1, client1 = thread_cpu_s(s.proc.pid), time.thread_time()
        s.engine_rates.append(engine_rate)
        s.client_rates.append(client_rate)
        s.chunks.append(n_chunks)
        s.cpu.append({**{role: cpu1[role] - cpu0[role] for role in cpu1}, "client": client1 - client0})

    direct(0)  # warm-up: pages, caches, connections
    for s in servers:
        served(s, 0)
        s.engine_rates.clear(), s.client_rates.clear(), s.chunks.clear(), s.cpu.clear()
    d = []
    for r in range(args.reps):  # interleaved, the order turned each round, so all see the same load
        sides: list = [None, *servers]
        for side in sides if r % 2 == 0 else sides[::-1]:
            if side is None:
                d.append(direct(r + 1))
            else:
                served(side, r + 1)
    for s in servers:
        s.stop()
    eng.close()

    med = statistics.median
    out: dict = {
        "stream": args.stream,
        "tokens": args.tokens,
        "reps": args.reps,
        "threads": eng.n_threads,
        "direct_tok_s": round(med(d), 2),
        "direct_runs": [round(x, 2) for x in d],
    }
    for s in servers:
        cpu_ms = {k: round(med(run[k] for run in s.cpu) * 1000, 1) for k in s.cpu[0]} if s.cpu[0] else {}
        out[s.name] = {
            "engine_tok_s": round(med(s.engine_rates), 2),
            "client_tok_s": round(med(s.client_rates), 2),
            "ratio_engine": round(med(s.engine_rates) / med(d), 4),
            "ratio_client": round(med(s.client_rates) / med(d), 4),
            "median_pairwise_ratio_client": round(med([b / a for a, b in zip(d, s.client_rates)]), 4),
            "chunks_per_stream": med(s.chunks),
            "cpu_ms_per_run": cpu_ms,
            "engine_runs": [round(x, 2) for x in s.engine_rates],
            "client_runs": [round(x, 2) for x in s.client_rates],
        }
    if args.json:
        print(json.dumps(out))
        return 0
    how = "" if args.stream else " (no stream)"
    print(f"generation{how}, {args.tokens} tokens, {eng.n_threads} threads, median of {args.reps}:")
    print(f"  direct (llambda generate's loop)     {out['direct_tok_s']:8.2f} tok/s")
    for s in servers:
        o = out[s.name]
        label = "this checkout" if s.name == "server" else args.compare
        print(f"  through the server ({label}):")
        print(f"    engine                             {o['engine_tok_s']:8.2f} tok/s ({o['ratio_engine']:.3f}x)")
        print(
            f"    client saw                         {o['client_tok_s']:8.2f} tok/s ({o['ratio_client']:.3f}x; "
            f"pairwise {o['median_pairwise_ratio_client']:.3f}x)"
        )
        print(f"    content chunks per stream          {o['chunks_per_stream']:8g}")
        if o["cpu_ms_per_run"]:
            print("    CPU ms per run: " + ", ".join(f"{k} {v:g}" for k, v in o["cpu_ms_per_run"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
