"""A full disk (issue #22, item 2), on a real filesystem that fills up: a tmpfs of a few MB
mounted by the test (`small_disk` in conftest.py; skipped, saying why, where it cannot mount).

- a chat write: the reply stays on screen, one line says it could not be saved, the database
  stays intact and the next save after space returns writes it;
- a model import: one line, no partial file, the library index unchanged;
- a KV-state write or a log line: ignored with a log line, never a crash.
"""

from __future__ import annotations

import logging
import os
import sqlite3

import pytest
from PySide6.QtCore import Qt

from app.chats.store import COMPLETE, STREAMING, ChatStore
from app.errors import LibraryError
from app.library import ModelLibrary
from app.library import library as libmod
from app.ui.state import ChatState
from tests.synth import write_tiny_model
from tests.ui.conftest import drop_file
from tests.ui.fake_engine import FakeEngine

MB = 1 << 20
LONG_REPLY = " ".join(f"word{i}" for i in range(400))  # ~1.6 s at 4 ms a word: several writes


def quick_check(db) -> list[str]:
    """SQLite's own check, on a read-only connection of its own (the app's may be mid-failure)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("PRAGMA quick_check")]
    finally:
        conn.close()


def stored(db) -> list[tuple[str, str, str]]:
    """(role, status, content) of every message, read from the file by a fresh connection."""
    with ChatStore(db) as s:
        return [(m.role, m.status, m.content) for c in s.list_conversations() for m in s.messages(c.id)]


# -- the conversation store, without the window ----------------------------------------------------


def test_a_reply_that_cannot_be_written_is_kept_and_saved_when_space_returns(small_disk):
    disk = small_disk(2 * MB)
    db = disk.path / "chats.sqlite3"
    state = ChatState(ChatStore(db, reply_flush_interval=0.0))
    state.new_conversation()
    state.add_user_message("first question")
    r = state.begin_reply()
    disk.fill()
    for word in LONG_REPLY.split(" ")[:50]:
        state.append_reply(r.request_id, word + " ")  # every write fails: no exception
    line = state.take_save_problem()
    assert line is not None and "\n" not in line and "disk is full" in line
    state.finish_reply(r.request_id, {"completion_tokens": 50})
    assert r.message_id in state.unsaved and state.save_problem.startswith("This reply could not be saved")
    shown = state.messages()[-1]  # what the window shows: the whole reply
    assert shown.content == r.text and shown.status == COMPLETE
    assert quick_check(db) == ["ok"]
    assert state.store.get_message(r.message_id).status == STREAMING  # the file has the old row
    with pytest.raises(Exception, match="database or disk is full"):
        state.add_user_message("while full")  # the caller keeps the text (the window)
    disk.free()
    state.add_user_message("second question")  # the next save writes the reply first
    assert state.unsaved == {}
    state.close()
    assert stored(db) == [
        ("user", COMPLETE, "first question"),
        ("assistant", COMPLETE, r.text),
        ("user", COMPLETE, "second question"),
    ]
    assert quick_check(db) == ["ok"]


# -- the window ------------------------------------------------------------------------------------


def loaded_window(qtbot, make_window, tmp_path, engine):
    model = tmp_path / "tiny.gguf"
    write_tiny_model(model)
    w = make_window(lambda: engine)
    assert drop_file(w.chat.viewport(), model)
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=20000)
    return w


def send(qtbot, w, text):
    w.input.setPlainText(text)
    qtbot.keyClick(w.input, Qt.Key_Return)
    qtbot.waitUntil(lambda: not w.generating, timeout=20000)


def test_the_window_keeps_a_reply_it_cannot_save_and_saves_it_when_space_returns(
    qtbot, make_window, small_disk, tmp_path, monkeypatch
):
    disk = small_disk(4 * MB)
    monkeypatch.setenv("LLAMBDA_DATA_DIR", str(disk.path / "data"))
    engine = FakeEngine(reply=LONG_REPLY, delay=0.004)
    w = loaded_window(qtbot, make_window, tmp_path, engine)
    db = disk.path / "data" / "chats.sqlite3"
    send(qtbot, w, "first question")
    assert w.state.messages()[-1].content == LONG_REPLY

    filled = []
    w.worker.generation_started.connect(lambda *_: filled or filled.append(disk.fill()))
    send(qtbot, w, "second question")  # the disk fills as the reply starts
    assert filled and disk.available == 0
    reply = w.chat.messages[-1]
    assert reply.text == LONG_REPLY and reply.status == "complete"  # on screen, whole
    notice = w.notice.text()
    assert w.notice.isVisible() and "\n" not in notice
    assert notice.startswith("This reply could not be saved: the disk is full"), notice
    assert quick_check(db) == ["ok"]
    on_disk = stored(db)
    assert on_disk[-2] == ("user", COMPLETE, "second question")
    assert on_disk[-1][1] == STREAMING and on_disk[-1][2] != LONG_REPLY  # the old row, intact

    w.input.setPlainText("third question")  # still full: the text stays in the box
    qtbot.keyClick(w.input, Qt.Key_Return)
    assert not w.generating and w.input.toPlainText() == "third question"
    assert w.notice.text().startswith("Your message could not be saved: the disk is full")
    assert len(stored(db)) == 4

    disk.free()
    send(qtbot, w, "third question")  # space is back: both are written
    assert w.input.toPlainText() == "" and not w.notice.text().startswith(("This reply", "Your message"))
    w.close()
    assert stored(db) == [
        ("user", COMPLETE, "first question"),
        ("assistant", COMPLETE, LONG_REPLY),
        ("user", COMPLETE, "second question"),
        ("assistant", COMPLETE, LONG_REPLY),
        ("user", COMPLETE, "third question"),
        ("assistant", COMPLETE, LONG_REPLY),
    ]
    assert quick_check(db) == ["ok"]


def test_the_window_says_so_when_a_reply_cannot_even_begin(qtbot, make_window, small_disk, tmp_path, monkeypatch):
    disk = small_disk(4 * MB)
    monkeypatch.setenv("LLAMBDA_DATA_DIR", str(disk.path / "data"))
    w = loaded_window(qtbot, make_window, tmp_path, FakeEngine(reply="short answer"))
    send(qtbot, w, "first question")
    disk.fill()
    w.regenerate()  # deleting the old reply needs room too
    assert not w.generating
    assert "could not be saved: the disk is full" in w.notice.text() and "\n" not in w.notice.text()
    disk.free()
    w.regenerate()
    qtbot.waitUntil(lambda: not w.generating, timeout=20000)
    assert [m.content for m in w.state.messages()] == ["first question", "short answer"]


# -- a model import --------------------------------------------------------------------------------


@pytest.fixture
def library_on_a_small_disk(small_disk, tmp_path, monkeypatch):
    """A library on a 3 MB tmpfs holding one model already; the free-space check before copying
    is told to leave no margin, so the copy itself meets the full disk (as when another program
    fills it during the import)."""
    disk = small_disk(3 * MB)
    monkeypatch.setattr(libmod, "FREE_MARGIN_BYTES", 0)
    monkeypatch.setattr(libmod, "CHUNK_BYTES", 32 << 10)
    lib = ModelLibrary(disk.path / "models")
    first = lib.import_model(write_tiny_model(tmp_path / "first.gguf", seed=1))
    second = write_tiny_model(tmp_path / "second.gguf", seed=2)
    return disk, lib, first, second


def library_files(lib) -> dict[str, bytes]:
    return {n: (lib.folder / n).read_bytes() for n in sorted(os.listdir(lib.folder)) if n != ".lock"}


@pytest.mark.parametrize("when", ["during the copy", "at the index"])
def test_an_import_that_fills_the_disk_keeps_nothing(library_on_a_small_disk, when):
    disk, lib, first, second = library_on_a_small_disk
    before = library_files(lib)
    assert disk.available > second.stat().st_size  # the check before copying passes

    def progress(done, total):
        copying = any(n.startswith(libmod.PART_PREFIX) for n in os.listdir(lib.folder))
        if not disk.filler.exists() and (copying if when == "during the copy" else done == total):
            disk.fill()  # another program takes the rest

    with pytest.raises(LibraryError) as ei:
        lib.import_model(second, progress=progress)
    line = str(ei.value)
    assert "\n" not in line and line.startswith(f"disk full while importing {second.name}")
    assert line.endswith("nothing was kept")
    assert library_files(lib) == before  # no partial file, the same index
    assert [e.sha256 for e in lib.list()] == [first.sha256]
    disk.free()
    assert lib.import_model(second).name == "second"  # space is back: it imports


# -- a KV-state write, a log line ------------------------------------------------------------------


def test_a_kv_state_that_cannot_be_written_is_skipped_with_a_log_line(small_disk, caplog):
    import numpy as np

    from app.engine.kvstore import KVStore

    disk = small_disk(2 * MB)
    kv = KVStore(disk.path / "kv")
    sig = {"kv_type": "f16", "n_layer": 2}
    old = np.arange(64 << 10, dtype=np.uint32).view(np.uint8)  # 256 KB
    assert kv.save("model", "chat-1", sig, [1, 2, 3], old) is not None
    disk.fill()
    with caplog.at_level(logging.WARNING, logger="app.engine.kvstore"):
        assert kv.save("model", "chat-1", sig, [1, 2, 3, 4], old[::-1].copy()) is None
        assert kv.save("model", "chat-2", sig, [5, 6], old) is None
    lines = [r.getMessage() for r in caplog.records if r.name == "app.engine.kvstore"]
    assert len(lines) == 2 and all("KV state not saved" in x and "No space left" in x for x in lines)
    assert sorted(os.listdir(kv.folder)) == [kv.path_for("model", "chat-1").name]  # no temp file
    tokens, image = kv.load("model", "chat-1", sig, n_ctx=64)  # the old state, whole
    assert tokens == [1, 2, 3] and bytes(image) == bytes(old)
    disk.free()
    assert kv.save("model", "chat-2", sig, [5, 6], old) is not None


def test_log_lines_that_cannot_be_written_are_dropped_with_one_warning(small_disk, monkeypatch, capsys):
    from app import logs

    disk = small_disk(1 * MB)
    monkeypatch.setenv("LLAMBDA_LOG_DIR", str(disk.path / "logs"))
    path = logs.setup("window", force=True)
    log = logs.get("test")
    log.info("before the disk fills")
    disk.fill()
    capsys.readouterr()
    for i in range(2000):  # ~200 KB of lines: past any buffer
        log.info("line %d while the disk is full %s", i, "x" * 80)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "log lines dropped" in err and "No space left" in err, err
    assert "Traceback" not in err and "Logging error" not in err
    disk.free()
    log.info("after space returns")
    logs.shutdown()
    text = path.read_text(encoding="utf-8", errors="replace")
    assert "before the disk fills" in text and "after space returns" in text
    assert "is written again" in capsys.readouterr().err
