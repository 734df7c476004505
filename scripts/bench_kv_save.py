"""What saving a conversation's KV state costs the engine's thread: written there and then
(KVStore.save: copy, hash, write, fsync, rename) against a snapshot handed to the background
writer (StateKeeper.save: the copy only), and a decode step's time while that writer runs.
Prints one JSON line.

    python -m scripts.bench_kv_save MODEL.gguf [--tokens 3100] [--threads 2] [--runs 3]

The cache holds --tokens positions that were never decoded (their bytes are whatever the cache
starts with): only the size matters to a save. Each save goes to a new folder of a temporary
directory, so none is skipped as unchanged.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--tokens", type=int, default=3100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)

    from app.engine.engine import Engine
    from app.engine.kvkeeper import StateKeeper
    from app.engine.kvstore import KVStore

    folder = Path(tempfile.mkdtemp(prefix="llambda-kvsave-"))
    n = args.tokens
    with Engine(args.model, n_ctx=max(4096, n + 64), n_threads=args.threads) as eng:
        tokens = [1 + i % 1000 for i in range(n)]
        sync, handed, written = [], [], []
        for run in range(args.runs):
            eng.session.tokens = list(tokens)
            eng.kv_store = KVStore(folder / f"sync{run}")
            t0 = time.perf_counter()
            eng.save_state("k")
            sync.append(time.perf_counter() - t0)
            keeper = StateKeeper(KVStore(folder / f"keeper{run}"))
            eng.kv_store = keeper
            t0 = time.perf_counter()
            eng.save_state("k")
            handed.append(time.perf_counter() - t0)
            keeper.flush()
            written.append(time.perf_counter() - t0)
            keeper.close()

        def step_s(count=20) -> float:
            t0 = time.perf_counter()
            for _ in range(count):
                eng.decoder.decode([5], 200)
            return (time.perf_counter() - t0) / count

        idle = statistics.median(step_s() for _ in range(3))
        keeper = StateKeeper(KVStore(folder / "during"))
        eng.kv_store = keeper
        eng.session.tokens = list(tokens)
        eng.save_state("k")
        during = step_s()
        keeper.close()
        image = eng.decoder.kv_image_bytes(n)
    print(
        json.dumps(
            {
                "model": Path(args.model).name,
                "tokens": n,
                "image_bytes": image,
                "threads": args.threads,
                "sync_save_s": round(statistics.median(sync), 4),
                "snapshot_s": round(statistics.median(handed), 4),
                "background_written_s": round(statistics.median(written), 4),
                "decode_step_idle_s": round(idle, 5),
                "decode_step_during_write_s": round(during, 5),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
