"""The KV state keeper (app/engine/kvkeeper.py) on synthetic states: writes happen on its own
thread and never hold up the caller; a newer save of a conversation replaces a pending one; the
states in memory stay under their budget, least recently used out first, and a state no longer
in memory comes from the disk store; close() writes what is pending; the disk budget is honoured
when it changes."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from app.engine.kvkeeper import StateKeeper
from app.engine.kvstore import KVStore

SIG = {"kv_type": "f16"}


class SlowStore(KVStore):
    """A store whose every write waits until the test releases it (a write as slow as wanted),
    and that counts its disk reads."""

    def __init__(self, folder, **kw):
        super().__init__(folder, **kw)
        self.release = threading.Event()
        self.started = threading.Event()
        self.writes: list[tuple[str, int]] = []  # (key, n_tokens) in the order written
        self.loads = 0

    def save(self, model_id, key, signature, tokens, image):
        self.started.set()
        assert self.release.wait(60), "the test never released the writer"
        path = super().save(model_id, key, signature, tokens, image)
        self.writes.append((key, len(tokens)))
        return path

    def load(self, *a, **kw):
        self.loads += 1
        return super().load(*a, **kw)


def image(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + n).integers(0, 256, 1000 * n, dtype=np.uint8)


@pytest.fixture
def slow(tmp_path):
    return SlowStore(tmp_path)


def test_save_returns_at_once_and_the_state_is_readable_while_it_is_written(slow):
    keeper = StateKeeper(slow)
    # save() returns although the write cannot end before the release below (had it waited,
    # the write would fail after 60 s and this test with it)
    assert keeper.save("m", "a", SIG, [1, 2, 3], image(3)) is not None
    assert slow.started.wait(10) and not slow.writes  # the writer holds the write
    assert keeper.unchanged("m", "a", [1, 2, 3]) and not keeper.unchanged("m", "a", [1, 2])
    toks, img = keeper.load("m", "a", SIG, 100)  # from memory, during the write
    assert toks == [1, 2, 3] and np.array_equal(img, image(3)) and slow.loads == 0
    assert not img.flags.writeable  # a snapshot cannot be changed
    slow.release.set()
    assert keeper.close()
    assert slow.writes == [("a", 3)]
    got = KVStore(slow.folder).load("m", "a", SIG, 100)  # the file, bit for bit
    assert got[0] == [1, 2, 3] and np.array_equal(got[1], image(3))


def test_a_newer_save_of_a_conversation_replaces_a_pending_one(slow):
    keeper = StateKeeper(slow)
    keeper.save("m", "a", SIG, [1], image(1))
    assert slow.started.wait(10)  # [1] is being written, the writer waits
    keeper.save("m", "a", SIG, [1, 2], image(2))  # pending
    keeper.save("m", "b", SIG, [7], image(1, seed=7))  # another conversation: pending too
    keeper.save("m", "a", SIG, [1, 2, 3], image(3))  # replaces [1, 2]
    assert keeper.superseded == 1
    slow.release.set()
    assert keeper.flush(30)
    assert slow.writes == [("a", 1), ("b", 1), ("a", 3)]  # [1, 2] never written
    got = KVStore(slow.folder).load("m", "a", SIG, 100)
    assert got[0] == [1, 2, 3] and np.array_equal(got[1], image(3))
    keeper.close()


def test_close_writes_what_is_pending_and_later_saves_are_written_at_once(slow):
    keeper = StateKeeper(slow)
    keeper.save("m", "a", SIG, [1, 2], image(2))
    keeper.save("m", "b", SIG, [3, 4], image(2, seed=1))
    threading.Timer(0.2, slow.release.set).start()
    assert keeper.close(timeout=30)
    assert sorted(slow.writes) == [("a", 2), ("b", 2)]
    assert keeper.closed and keeper.save("m", "c", SIG, [5], image(1)) is not None
    assert slow.writes[-1] == ("c", 1)  # written before save() returned


def test_close_gives_up_after_its_timeout_and_says_so(slow, caplog):
    keeper = StateKeeper(slow)
    keeper.save("m", "a", SIG, [1], image(1))
    assert slow.started.wait(10)
    assert keeper.close(timeout=0.2) is False
    assert "still being written" in caplog.text
    slow.release.set()
    assert keeper.flush(30) and slow.writes == [("a", 1)]


def test_memory_keeps_the_recent_states_within_budget_and_the_disk_has_the_rest(slow):
    slow.release.set()
    one = 4 * 5 + image(5).nbytes
    keeper = StateKeeper(slow, ram_budget_bytes=2 * one + one // 2)  # room for two states
    for i, key in enumerate("abc"):
        keeper.save("m", key, SIG, [i] * 5, image(5, seed=i))
    assert keeper.flush(30)
    assert keeper.memory_bytes() == 2 * one  # "a" went out of memory first
    for i, key in enumerate("bc", start=1):
        toks, img = keeper.load("m", key, SIG, 100)
        assert toks == [i] * 5 and np.array_equal(img, image(5, seed=i))
    assert slow.loads == 0 and keeper.memory_hits == 2
    toks, img = keeper.load("m", "a", SIG, 100)  # from disk, the same bits
    assert slow.loads == 1 and toks == [0] * 5 and np.array_equal(img, image(5, seed=0))
    assert keeper.peek("m", "c", {"kv_type": "q8_0"}, 100) is None  # other settings: not this state
    assert keeper.peek("m", "c", SIG, 4) is None  # does not fit the context
    big = StateKeeper(KVStore(slow.folder / "big"), ram_budget_bytes=one - 1)
    big.save("m", "x", SIG, [1] * 5, image(5))  # too big for memory: disk only
    assert big.flush(30) and big.memory_bytes() == 0
    assert big.load("m", "x", SIG, 100)[0] == [1] * 5
    keeper.forget_memory()
    assert keeper.memory_bytes() == 0
    keeper.close()
    big.close()


def test_the_disk_budget_is_honoured_when_it_changes(tmp_path):
    store = KVStore(tmp_path)
    keeper = StateKeeper(store)
    for i, key in enumerate("abc"):
        keeper.save("m", key, SIG, [i] * 5, image(5, seed=i))
        assert keeper.flush(30)
        os.utime(store.path_for("m", key), (1000 + i, 1000 + i))  # "a" least recently used
    # the two newest files' own sizes (a state file's header is a byte longer or shorter with its
    # figures, so twice the oldest one's size could leave no room for both)
    room = sum(store.path_for("m", k).stat().st_size for k in "bc")
    keeper.set_budget(room)  # at once: the oldest goes
    assert [k for k in "abc" if store.path_for("m", k).exists()] == ["b", "c"]
    keeper.set_budget(0)  # off: none kept, none written
    assert not list(tmp_path.glob("*.llkv"))
    keeper.save("m", "d", SIG, [1], image(1))
    assert keeper.flush(30) and not list(tmp_path.glob("*.llkv"))
    keeper.close()
