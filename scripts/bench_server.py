"""Generation speed through `llambda serve` against the engine called directly (what
`llambda generate` runs), one client, alternating run by run so both see the same machine load:

    python scripts/bench_server.py MODEL.gguf [--tokens 128] [--reps 5] [--threads 0] [--no-stream] [--json]

Direct: `Engine.generate` in this process, end-of-turn tokens ignored so every run makes
--tokens tokens. Server: `llambda serve` in its own process (as other programs use it), the same
request through the official `openai` client, streamed over loopback. Reports per side the median
generation tokens/s the engine measured, for the server also what the client saw (tokens over the
time from its first to its last piece), and the ratios.
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
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    import openai

    from app.engine.engine import Engine
    from app.engine.generate import Finished, GenerationRequest
    from app.engine.sampler import SamplerSettings

    eng = Engine(args.model, n_ctx=1024, n_threads=args.threads)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "serve",
            args.model,
            "--port",
            "0",
            "--ctx",
            "1024",
            "--threads",
            str(args.threads),
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    line = server.stderr.readline()
    if "http://" not in line:
        server.kill()
        raise SystemExit(f"the server did not start: {line.strip()}")
    base = line.split("http://", 1)[1].split()[0]
    threading.Thread(target=server.stderr.read, daemon=True).start()  # keep its pipe drained
    client = openai.OpenAI(base_url="http://" + base, api_key="x", max_retries=0)
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

    def served_whole(seed: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        r = client.chat.completions.create(
            model="bench", messages=messages, max_tokens=args.tokens, seed=seed, extra_body={"ignore_eos": True}
        )
        assert r.usage.completion_tokens == args.tokens
        return r.model_extra["timings"]["generation_tok_s"], args.tokens / (time.perf_counter() - t0)

    def served(seed: int) -> tuple[float, float]:
        if not args.stream:
            return served_whole(seed)
        stream = client.chat.completions.create(
            model="bench",
            messages=messages,
            max_tokens=args.tokens,
            seed=seed,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        first = last = None
        engine_rate = n = 0
        for chunk in stream:
            now = time.perf_counter()
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or now
                last = now
            if chunk.choices and chunk.choices[0].finish_reason:
                engine_rate = chunk.model_extra["timings"]["generation_tok_s"]
            if chunk.usage:
                n = chunk.usage.completion_tokens
        assert n == args.tokens
        return engine_rate, (n - 1) / (last - first)

    direct(0), served(0)  # warm-up: pages, caches, connections
    d, s_engine, s_client = [], [], []
    for r in range(args.reps):  # alternate so that both see the same machine load
        d.append(direct(r + 1))
        e, c = served(r + 1)
        s_engine.append(e)
        s_client.append(c)
    server.send_signal(signal.SIGINT)
    server.wait(30)
    eng.close()
    med = statistics.median
    out = {
        "stream": args.stream,
        "tokens": args.tokens,
        "reps": args.reps,
        "threads": eng.n_threads,
        "direct_tok_s": round(med(d), 2),
        "server_engine_tok_s": round(med(s_engine), 2),
        "server_client_tok_s": round(med(s_client), 2),
        "ratio_engine": round(med(s_engine) / med(d), 4),
        "ratio_client": round(med(s_client) / med(d), 4),
        "direct_runs": [round(x, 2) for x in d],
        "server_engine_runs": [round(x, 2) for x in s_engine],
        "server_client_runs": [round(x, 2) for x in s_client],
        "median_pairwise_ratio_engine": round(med([b / a for a, b in zip(d, s_engine)]), 4),
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(
            f"generation{'' if args.stream else ' (no stream)'}, {args.tokens} tokens, {eng.n_threads} threads, median of {args.reps}:"
        )
        print(f"  direct (llambda generate's loop) {out['direct_tok_s']:8.2f} tok/s")
        print(
            f"  through the server, engine       {out['server_engine_tok_s']:8.2f} tok/s ({out['ratio_engine']:.3f}x)"
        )
        print(
            f"  through the server, client saw   {out['server_client_tok_s']:8.2f} tok/s ({out['ratio_client']:.3f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
