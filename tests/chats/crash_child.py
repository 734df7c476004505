"""Child process for the SIGKILL test: writes conversations as fast as it can until killed.

Usage: python -m tests.chats.crash_child DB RUN. After each call into the store returns (so
after its commit) it prints one line saying what is now on disk; the parent checks those.
Texts are deterministic (see `user_text`, `reply_text`) so the parent can rebuild them.
"""

from __future__ import annotations

import random
import sys


def user_text(run: int, conv: int, turn: int, n: int) -> str:
    return f"user {run} {conv} {turn} " + "x" * n


def reply_text(n_tokens: int) -> str:
    return "".join(f"tok{k} " for k in range(n_tokens))


def main(db: str, run: int) -> None:
    from app.chats.store import ChatStore

    rnd = random.Random(run)
    store = ChatStore(db, reply_flush_interval=0.0)
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    while True:
        cid = store.create_conversation(title=f"run {run}", model="m")
        out.write(f"conv {cid}\n")
        out.flush()
        for turn in range(3):
            n = rnd.randint(0, 3000)
            mid = store.add_message(cid, "user", user_text(run, cid, turn, n))
            out.write(f"user {mid} {cid} {turn} {n}\n")
            out.flush()
            rid = store.begin_reply(cid, model="m")
            n_tokens = rnd.randint(5, 60)
            for k in range(1, n_tokens + 1):
                store.update_reply(rid, reply_text(k))
            store.finish_reply(rid, {"completion_tokens": n_tokens, "tg_ms": 1.0})
            out.write(f"done {rid} {n_tokens}\n")
            out.flush()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
