"""Child process for the SIGKILL test of saved KV states: saves states of alternating contents
under one key as fast as it can until killed, printing "saved N" after each save returns.

Usage: python -m tests.engine.kv_crash_child FOLDER START. States START+1, START+2... State N holds tokens [N] * (N % 7 + 1) and
`image(N)` (deterministic), so the parent can tell which one a file holds and check every byte.
"""

from __future__ import annotations

import sys

import numpy as np

SIG = {"kv_type": "f16", "n_layer": 1}
MODEL, KEY = "sampled:test", "chat:crash"


def image(n: int) -> np.ndarray:
    return np.random.default_rng(n).integers(0, 256, (3 << 20) + 17 * (n % 1000), dtype=np.uint8)


def tokens(n: int) -> list[int]:
    return [n] * (n % 7 + 1)


def main(folder: str, start: int) -> None:
    from app.engine.kvstore import KVStore

    store = KVStore(folder)
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    n = start
    while True:
        n += 1
        store.save(MODEL, KEY, SIG, tokens(n), image(n))
        out.write(f"saved {n}\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
