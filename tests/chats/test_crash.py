"""SIGKILL at random moments while a child writes: the database is never corrupted, and at
most the reply in flight is lost (it comes back, as far as it was written, marked interrupted)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.chats.store import ChatStore
from tests.chats.crash_child import reply_text, user_text

REPO = Path(__file__).resolve().parents[2]
N_KILLS = 24

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")


def run_and_kill(db: Path, run: int, rnd: random.Random) -> tuple[list[str], bool]:
    """Start a writer, kill it at a random moment, return (lines it printed, was it past open)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.chats.crash_child", str(db), str(run)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    lines: list[str] = []
    ready = threading.Event()

    def reader():
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            ready.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    if run % 4 == 0:
        time.sleep(rnd.uniform(0.0, 0.15))  # may land while it starts, opens or creates the DB
    else:
        assert ready.wait(30), "writer never became ready"
        time.sleep(rnd.uniform(0.01, 0.25))  # lands in the middle of writing
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    t.join(30)
    assert proc.returncode == -signal.SIGKILL
    return lines, "ready" in lines


def test_sigkill_while_writing_never_corrupts(tmp_path):
    db = tmp_path / "chats.sqlite3"
    rnd = random.Random(20261129)
    users: dict[int, str] = {}  # message id -> text the child saw committed
    replies: dict[int, str] = {}  # finished reply id -> text
    kills_mid_write = 0
    for run in range(N_KILLS):
        lines, was_ready = run_and_kill(db, run, rnd)
        kills_mid_write += was_ready
        for line in lines:
            kind, *f = line.split()
            if kind == "user":
                mid, cid, turn, n = map(int, f)
                users[mid] = user_text(run, cid, turn, n)
            elif kind == "done":
                rid, n_tokens = map(int, f)
                replies[rid] = reply_text(n_tokens)
        if not db.exists():
            continue
        # 1. SQLite itself finds nothing wrong (before our own code touches the file)
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)], f"run {run}"
        con.close()
        # 2. it opens, indexes agree, and nothing reported committed was lost
        with ChatStore(db, stale_stream_after=0) as s:
            assert s.integrity_check() == [], f"run {run}"
            for mid, text in users.items():
                m = s.get_message(mid)
                assert (m.role, m.content, m.status) == ("user", text, "complete")
            for rid, text in replies.items():
                m = s.get_message(rid)
                assert (m.content, m.status) == (text, "complete")
            # 3. only replies in flight are incomplete: one per kill at most, kept as far as written
            unfinished = s._read("SELECT id, content, status FROM messages WHERE status != 'complete'")
            assert len(unfinished) <= run + 1
            for mid, content, status in unfinished:
                assert status == "interrupted" and mid not in replies
                assert reply_text(content.count("tok")) == content
    assert kills_mid_write >= N_KILLS // 2
    assert len(replies) >= N_KILLS // 2  # the writers really wrote between kills (fewer on a loaded machine)
    with ChatStore(db) as s:
        interrupted = s._read("SELECT count(*) FROM messages WHERE status = 'interrupted'")[0][0]
    assert interrupted >= 5  # kills did land in the middle of replies
