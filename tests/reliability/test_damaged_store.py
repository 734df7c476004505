"""Issue #22, item 4: a damaged conversation database.

A truncated file, a bit-flipped page, a file that is not SQLite at all, and a database from a
newer Llambda are each found when the store opens; the original is kept byte for byte under a
dated name beside it; a fresh store starts (with what could still be read, for a damaged one);
the user is told in one line, which the window shows; no exception escapes and nothing is
overwritten.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from app.chats import ChatStore, schema
from app.chats import recovery
from app.chats.recovery import open_store
from app.paths import chats_db_path

PAGE = 4096
N_CONVS, N_MSGS = 12, 8


def make_db(path: Path) -> bytes:
    """A real database, closed (its WAL checkpointed into the file); returns its bytes."""
    with ChatStore(path) as s:
        for i in range(N_CONVS):
            c = s.create_conversation(f"conv {i}", system_prompt=f"prompt {i}")
            for j in range(N_MSGS):
                s.add_message(c, "user" if j % 2 == 0 else "assistant", f"needle-{i}-{j}: " + "words " * 40)
        s.set_setting("theme", "dark")
    assert not Path(f"{path}-wal").exists()
    return path.read_bytes()


def page_holding(data: bytes, marker: bytes) -> int:
    """The first page whose bytes contain `marker` (a table leaf of messages here)."""
    for off in range(PAGE, len(data), PAGE):
        if marker in data[off : off + PAGE]:
            return off // PAGE
    raise AssertionError(f"{marker!r} is on no page")


def truncated_half(good: bytes) -> bytes:
    return good[: len(good) // 2]


def truncated_mid_page(good: bytes) -> bytes:
    return good[: len(good) - PAGE - 1000]


def bit_flipped_page(good: bytes) -> bytes:
    """One bit of one page's b-tree header (its cell count) flipped, as a bad sector would."""
    data = bytearray(good)
    off = page_holding(good, b"needle-5-3:") * PAGE
    assert data[off] == 0x0D  # a table leaf page
    data[off + 4] ^= 0x10
    return bytes(data)


def not_sqlite(good: bytes) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40


def sqlite_header_then_garbage(good: bytes) -> bytes:
    return good[:100] + b"\xff" * (len(good) - 100)


DAMAGE = [truncated_half, truncated_mid_page, bit_flipped_page, not_sqlite, sqlite_header_then_garbage]
ASIDE = re.compile(r"^chats\.sqlite3\.damaged-\d{4}-\d\d-\d\dT\d{4}$")


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__)
def test_damaged_database_is_set_aside_untouched_and_a_fresh_store_starts(damage):
    path = chats_db_path()
    bad = damage(make_db(path))
    path.write_bytes(bad)

    store = open_store()  # never raises
    try:
        assert store.saving and store.path == path
        aside = store.set_aside
        assert aside is not None and aside.parent == path.parent and ASIDE.match(aside.name), aside
        assert aside.read_bytes() == bad  # the original, byte for byte
        assert "\n" not in store.notice and str(aside) in store.notice
        assert "damaged" in store.notice
        assert store.integrity_check() == []  # the fresh store is healthy ...
        cid = store.create_conversation("after the damage")  # ... and written to
        store.add_message(cid, "user", "still here")
    finally:
        store.close()
    again = open_store()  # and opens cleanly next time
    try:
        assert again.notice is None and again.set_aside is None
        assert "after the damage" in [c.title for c in again.list_conversations()]
    finally:
        again.close()
    assert aside.read_bytes() == bad
    assert [n for n in files(path.parent) if ASIDE.match(n)] == [aside.name]


def test_a_bit_flipped_page_loses_only_that_page(tmp_path):
    path = tmp_path / "chats.sqlite3"
    good = make_db(path)
    bad = bit_flipped_page(good)
    path.write_bytes(bad)
    assert recovery.check(path).state == recovery.DAMAGED
    store = open_store(path)
    try:
        assert store.set_aside.read_bytes() == bad
        assert f"with the {N_CONVS} conversations that could still be read" in store.notice
        convs = store.list_conversations()
        assert sorted(c.title for c in convs) == sorted(f"conv {i}" for i in range(N_CONVS))
        assert store.get_setting("theme") == "dark"
        texts = {m.content.split(":")[0] for c in convs for m in store.messages(c.id)}
        everything = {f"needle-{i}-{j}" for i in range(N_CONVS) for j in range(N_MSGS)}
        assert "needle-0-0" in texts and f"needle-{N_CONVS - 1}-{N_MSGS - 1}" in texts
        assert len(texts & everything) < len(everything)  # the broken page's rows are gone ...
        assert len(texts & everything) >= len(everything) // 2  # ... and only those
        assert [h.conversation_id for h in store.search("needle 0 0")]  # indexed again
        assert store.integrity_check() == []
    finally:
        store.close()


def test_newer_schema_is_kept_aside_and_never_repaired(tmp_path):
    path = tmp_path / "chats.sqlite3"
    make_db(path)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    newer = path.read_bytes()
    assert recovery.check(path).state == recovery.NEWER

    store = open_store(path)
    try:
        aside = store.set_aside
        assert re.match(r"^chats\.sqlite3\.newer-\d{4}-\d\d-\d\dT\d{4}$", aside.name)
        assert aside.read_bytes() == newer  # not migrated, not "repaired"
        assert "newer Llambda" in store.notice and str(aside) in store.notice
        assert f"schema version {schema.SCHEMA_VERSION + 1}" in store.notice
        assert "\n" not in store.notice
        assert store.list_conversations() == [] and store.schema_version == schema.SCHEMA_VERSION
    finally:
        store.close()
    ro = sqlite3.connect(f"{aside.as_uri()}?mode=ro", uri=True)
    assert ro.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION + 1
    assert ro.execute("SELECT count(*) FROM conversations").fetchone()[0] == N_CONVS
    ro.close()


def test_an_earlier_copy_aside_is_never_overwritten(tmp_path, monkeypatch):
    monkeypatch.setattr(recovery.time, "strftime", lambda fmt, *a: "2026-12-01T0712")
    path = tmp_path / "chats.sqlite3"
    earlier = tmp_path / "chats.sqlite3.damaged-2026-12-01T0712"
    earlier.write_bytes(b"an earlier damaged database")
    for n, junk in ((2, b"first junk" * 100), (3, b"second junk" * 100)):
        path.write_bytes(junk)
        store = open_store(path)
        store.close()
        assert store.set_aside.name == f"chats.sqlite3.damaged-2026-12-01T0712-{n}"
        assert store.set_aside.read_bytes() == junk
    assert earlier.read_bytes() == b"an earlier damaged database"


def test_the_write_ahead_log_goes_aside_with_its_database(tmp_path):
    path = tmp_path / "chats.sqlite3"
    good = make_db(path)
    live = ChatStore(path)
    live.create_conversation("only in the log so far")
    wal = Path(f"{path}-wal").read_bytes()
    live.close()
    path.write_bytes(not_sqlite(good))  # the main file wrecked
    Path(f"{path}-wal").write_bytes(wal)  # its log as it was
    store = open_store(path)
    try:
        aside = store.set_aside
        assert Path(f"{aside}-wal").read_bytes() == wal
        assert not any(
            n.endswith("-wal") and n.startswith("chats.sqlite3.damaged") and n != f"{aside.name}-wal"
            for n in files(tmp_path)
        )
        assert store.integrity_check() == [] and store.notice
    finally:
        store.close()


def test_a_database_that_cannot_be_opened_is_left_in_place(tmp_path):
    path = tmp_path / "chats.sqlite3"
    path.mkdir()  # not even a file
    (path / "keep").write_text("mine")
    store = open_store(path)  # no exception ...
    try:
        assert not store.saving and store.set_aside is None  # ... nothing moved, nothing saved
        assert "not being saved" in store.notice and str(path) in store.notice
        cid = store.create_conversation("in memory")
        store.add_message(cid, "user", "works for this session")
    finally:
        store.close()
    assert files(tmp_path) == ["chats.sqlite3"] and (path / "keep").read_text() == "mine"


def test_a_healthy_database_opens_as_before(tmp_path):
    path = tmp_path / "chats.sqlite3"
    make_db(path)
    store = open_store(path)
    try:
        assert store.notice is None and store.set_aside is None and store.saving
        assert len(store.list_conversations()) == N_CONVS
    finally:
        store.close()
    assert files(tmp_path) == ["chats.sqlite3"]


# -- the window says it ---------------------------------------------------------------------------


def test_the_window_shows_the_line_for_a_damaged_database(make_window, fake_engine):
    path = chats_db_path()
    bad = truncated_half(make_db(path))
    path.write_bytes(bad)
    w = make_window(lambda: fake_engine)
    aside = w.state.store.set_aside
    assert aside is not None and aside.read_bytes() == bad
    assert w.startup_banner.isVisible()
    assert w.state.store.notice in w.startup_banner.label.text()
    assert str(aside) in w.startup_banner.label.text()
    w.on_conversations_new_requested()  # the fresh store works in the window
    assert w.state.current_id is not None
    w.startup_banner.dismiss_button.click()
    assert not w.startup_banner.isVisible()


def test_the_window_shows_the_line_for_a_newer_database(make_window, fake_engine):
    path = chats_db_path()
    make_db(path)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 5}")
    db.commit()
    db.close()
    w = make_window(lambda: fake_engine)
    assert w.startup_banner.isVisible() and "newer Llambda" in w.startup_banner.label.text()
    assert w.state.conversations() == []


def test_a_healthy_start_shows_no_banner(make_window, fake_engine):
    make_db(chats_db_path())
    w = make_window(lambda: fake_engine)
    assert w.startup_problems == [] and not w.startup_banner.isVisible()
    assert len(w.state.conversations()) == N_CONVS
