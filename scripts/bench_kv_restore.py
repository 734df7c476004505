"""Time to the first token when a long conversation comes back: cold (no saved KV state: the whole
prompt is decoded) against warm (the state saved after the last reply is restored and only the new
message is decoded). Prints one JSON line per model.

    python -m scripts.bench_kv_restore MODEL.gguf [MODEL2.gguf ...] [--tokens 3000] [--kv-type f16]

The conversation is synthetic (numbered sentences as user and assistant turns) up to about
--tokens tokens; the same process runs both, each on a freshly loaded engine, so the file cache is
warm for the state file (as it is when a conversation is switched back to within a session).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time


def conversation(eng, n_tokens: int) -> list[dict]:
    turns, i = [], 0
    while True:
        q = f"Question {i}: what is said in paragraph {i}? " + " ".join(
            f"Sentence {i}.{k} tells about river number {k * 7 + i} and its bridges." for k in range(6)
        )
        a = f"Answer {i}: paragraph {i} lists rivers " + ", ".join(str(k * 7 + i) for k in range(6)) + "."
        turns += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        if len(eng.chat_prompt(turns)) >= n_tokens:
            return turns
        i += 1


def ttft(eng, history, text) -> tuple[float, int, int]:
    from app.engine.engine import Chat
    from app.engine.generate import Finished
    from app.engine.sampler import SamplerSettings

    chat = Chat(eng)
    chat.messages = [dict(m) for m in history]
    t0 = time.perf_counter()
    fin = [e for e in chat.send(text, SamplerSettings(temperature=0.0), max_tokens=1) if isinstance(e, Finished)][-1]
    return time.perf_counter() - t0, fin.stats.prompt_tokens, fin.stats.prompt_tokens_evaluated


def run(path: str, n_tokens: int, kv_type: str, threads: int) -> dict:
    from app.engine.engine import Engine, conversation_key
    from app.engine.kvstore import KVStore

    folder = tempfile.mkdtemp(prefix="llkv-bench-")
    store = KVStore(folder)
    n_ctx = 4096 if n_tokens < 3800 else n_tokens + 512
    with Engine(path, n_ctx=n_ctx, n_threads=threads, kv_type=kv_type, kv_store=store) as eng:
        history = conversation(eng, n_tokens)
        # the conversation as it was left: its whole history in the cache, the state saved
        eng.session.feed(eng.chat_prompt(history, add_generation_prompt=False))
        t0 = time.perf_counter()
        eng.save_state(conversation_key(None, history[0]["content"]))
        save_s = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    new = "And which river comes last in all of this?"
    with Engine(path, n_ctx=n_ctx, n_threads=threads, kv_type=kv_type, kv_store=None) as eng:
        cold_s, n_prompt, cold_eval = ttft(eng, history, new)
    with Engine(path, n_ctx=n_ctx, n_threads=threads, kv_type=kv_type, kv_store=store) as eng:
        warm_s, _, warm_eval = ttft(eng, history, new)
    return {
        "model": os.path.basename(path),
        "kv_type": kv_type,
        "threads": threads,
        "prompt_tokens": n_prompt,
        "cold_ttft_s": round(cold_s, 3),
        "cold_decoded": cold_eval,
        "warm_ttft_s": round(warm_s, 3),
        "warm_decoded": warm_eval,
        "warm_over_cold": round(warm_s / cold_s, 4),
        "save_s": round(save_s, 3),
        "state_file_bytes": size,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--tokens", type=int, default=3000)
    ap.add_argument("--kv-type", default="f16")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    for m in a.models:
        print(json.dumps(run(m, a.tokens, a.kv_type, a.threads)), flush=True)


if __name__ == "__main__":
    main()
