"""Conversation store: written as it happens, damaged rows isolated, search, export, migration."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from app import paths
from app.chats import ChatStore, conversation_to_markdown, export_json, export_markdown
from app.chats import schema
from app.errors import StoreError


@pytest.fixture
def store():
    s = ChatStore()
    yield s
    s.close()


def raw(path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_store_lives_in_the_data_folder_never_the_cache(store, isolated_home):
    assert store.path == paths.chats_db_path()
    assert Path(isolated_home) / "data" in store.path.parents
    assert paths.cache_dir() not in store.path.parents
    assert raw(store.path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.schema_version == schema.SCHEMA_VERSION


def test_conversation_fields_round_trip(store):
    cid = store.create_conversation(
        "Trip", model="smollm2", system_prompt="Be brief.", sampling={"temperature": 0.5, "top_p": 0.9}
    )
    c = store.get_conversation(cid)
    assert (c.title, c.model, c.system_prompt, c.sampling) == (
        "Trip",
        "smollm2",
        "Be brief.",
        {"temperature": 0.5, "top_p": 0.9},
    )
    assert c.created == c.updated and not c.damaged
    store.update_conversation(cid, sampling={"temperature": 1.0}, model="other")
    c2 = store.get_conversation(cid)
    assert c2.sampling == {"temperature": 1.0} and c2.model == "other" and c2.updated >= c.updated


def test_user_message_is_committed_at_once(store):
    cid = store.create_conversation("x")
    mid = store.add_message(cid, "user", "hello there")
    # another connection (another process, after a crash) sees it right away
    assert raw(store.path).execute("SELECT content FROM messages WHERE id = ?", (mid,)).fetchone() == ("hello there",)
    with pytest.raises(ValueError):
        store.add_message(cid, "wizard", "no")
    with pytest.raises(StoreError):
        store.add_message(9999, "user", "no such conversation")  # foreign keys are on


def test_streaming_reply_is_written_at_least_every_interval(tmp_path):
    s = ChatStore(tmp_path / "c.db", reply_flush_interval=0.2)
    cid = s.create_conversation("x")
    rid = s.begin_reply(cid, model="m")

    def on_disk():
        return raw(s.path).execute("SELECT content, status FROM messages WHERE id = ?", (rid,)).fetchone()

    assert on_disk() == ("", "streaming")
    assert s.update_reply(rid, "a") is False  # too soon after begin
    time.sleep(0.25)
    assert s.update_reply(rid, "a b") is True
    assert on_disk() == ("a b", "streaming")
    assert s.update_reply(rid, "a b c") is False
    s.flush()  # a timer may flush a stalled stream
    assert on_disk() == ("a b c", "streaming")
    s.update_reply(rid, "a b c d")
    s.finish_reply(rid, {"prompt_tokens": 7, "completion_tokens": 4, "tg_tokens_per_s": 12.5, "pp_ms": 3.0})
    m = s.get_message(rid)
    assert (m.content, m.status, m.prompt_tokens, m.completion_tokens, m.model) == ("a b c d", "complete", 7, 4, "m")
    assert m.timings == {"tg_tokens_per_s": 12.5, "pp_ms": 3.0}
    s.close()


def test_reply_left_streaming_is_marked_interrupted_on_open(tmp_path):
    s = ChatStore(tmp_path / "c.db", reply_flush_interval=0)
    cid = s.create_conversation("x")
    rid = s.begin_reply(cid)
    s.update_reply(rid, "half a rep")
    s._conn.close()  # as if the process died
    s._conn = None
    s2 = ChatStore(tmp_path / "c.db", stale_stream_after=0)
    m = s2.get_message(rid)
    assert (m.content, m.status) == ("half a rep", "interrupted")
    s2.close()


def test_rename_soft_delete_restore_purge(store):
    a = store.create_conversation("a")
    b = store.create_conversation("b")
    store.add_message(b, "user", "keep me")
    store.rename_conversation(a, "renamed")
    assert store.get_conversation(a).title == "renamed"
    store.delete_conversation(b)
    assert [c.id for c in store.list_conversations()] == [a]
    assert [c.id for c in store.list_conversations(deleted_only=True)] == [b]
    store.restore_conversation(b)  # undo
    assert {c.id for c in store.list_conversations()} == {a, b}
    assert store.messages(b)[0].content == "keep me"
    store.delete_conversation(b)
    assert store.purge_deleted(older_than=3600) == 0  # too recent
    assert store.purge_deleted() == 1
    assert raw(store.path).execute("SELECT count(*) FROM messages").fetchone() == (0,)  # cascade


def test_search_is_full_text_and_skips_the_bin(store):
    a = store.create_conversation("Cooking")
    store.add_message(a, "user", "How long do I boil an egg?")
    store.add_message(a, "assistant", "About nine minutes for a hard-boiled egg.")
    b = store.create_conversation("Travel")
    store.add_message(b, "user", "Trains from Lyon to Geneva")
    hits = store.search("boil")
    assert {h.message_id for h in hits} == {1, 2}  # prefix: boil matches boiled
    assert all(h.title == "Cooking" and "[" in h.snippet for h in hits)
    assert [h.conversation_id for h in store.search("geneva trains")] == [b]
    assert store.search('"unbalanced AND (quote -:*') == []  # user text is never FTS syntax
    assert store.search("   ") == []
    store.delete_conversation(a)
    assert store.search("egg") == []
    # replies are indexed as they stream and when they finish
    rid = store.begin_reply(b)
    store.update_reply(rid, "take the TGV", force=True)
    assert [h.message_id for h in store.search("tgv")] == [rid]
    store.finish_reply(rid, text="take the regional train")
    assert store.search("tgv") == [] and [h.message_id for h in store.search("regional")] == [rid]
    assert store.integrity_check() == []


def test_exports_are_complete_and_atomic(store, tmp_path, monkeypatch):
    cid = store.create_conversation("Export me", model="m", system_prompt="sys", sampling={"seed": 1})
    store.add_message(cid, "user", "question ✓")
    rid = store.begin_reply(cid, model="m")
    store.finish_reply(rid, {"completion_tokens": 2}, text="answer")
    j = export_json(store, cid, tmp_path / "out" / "c.json")
    d = json.loads(j.read_text("utf-8"))
    assert d["format"] == "llambda-conversation" and d["title"] == "Export me" and d["sampling"] == {"seed": 1}
    assert [(m["role"], m["content"]) for m in d["messages"]] == [("user", "question ✓"), ("assistant", "answer")]
    md = export_markdown(store, cid, tmp_path / "out" / "c.md").read_text("utf-8")
    assert md == conversation_to_markdown(store, cid)
    assert md.startswith("# Export me\n") and "## System\n\nsys" in md and "## Assistant\n\nanswer" in md
    # a failure while writing leaves the previous export whole, and no temporary file
    monkeypatch.setattr(paths.os, "replace", lambda a, b: (_ for _ in ()).throw(OSError(28, "No space left")))
    with pytest.raises(OSError):
        export_json(store, cid, j)
    assert json.loads(j.read_text("utf-8")) == d
    assert sorted(os.listdir(j.parent)) == ["c.json", "c.md"]


def test_damaged_rows_do_not_hide_the_others(store):
    ids = [store.create_conversation(f"conv {i}", sampling={"t": i}) for i in range(4)]
    for cid in ids:
        store.add_message(cid, "user", f"message in {cid}")
        store.add_message(cid, "assistant", f"reply in {cid}")
    bad, worse = ids[1], ids[2]
    db = raw(store.path)
    db.execute(
        "UPDATE conversations SET title = CAST(x'fffe41' AS TEXT), sampling = 'not json{', "
        "created = 'yesterday' WHERE id = ?",
        (bad,),
    )
    db.execute("UPDATE conversations SET sampling = x'00ff', updated = x'01', model = 42 WHERE id = ?", (worse,))
    db.execute(
        "UPDATE messages SET content = CAST(x'c328' AS TEXT), timings = '[1,2]', "
        "completion_tokens = 'many', role = 'robot' WHERE conversation_id = ? AND role = 'assistant'",
        (ids[3],),
    )
    db.close()
    convs = {c.id: c for c in store.list_conversations()}
    assert set(convs) == set(ids)
    assert [convs[i].damaged for i in ids] == [False, True, True, False]
    assert convs[ids[0]].title == "conv 0" and convs[ids[3]].sampling == {"t": 3}
    assert "A" in convs[bad].title and convs[bad].sampling == {}
    msgs = store.messages(ids[3])
    assert [m.damaged for m in msgs] == [False, True]
    assert msgs[0].content == f"message in {ids[3]}" and "\ufffd" in msgs[1].content
    # export and search still work around them
    assert conversation_to_markdown(store, bad).startswith("# ")
    assert {h.conversation_id for h in store.search("message")} == set(ids)


def test_not_a_database_is_refused_and_left_untouched(tmp_path):
    p = tmp_path / "c.db"
    p.write_bytes(b"this is not sqlite at all" * 100)
    before = p.read_bytes()
    with pytest.raises(StoreError, match="left untouched"):
        ChatStore(p)
    assert p.read_bytes() == before


def test_newer_schema_is_refused(tmp_path):
    p = tmp_path / "c.db"
    ChatStore(p).close()
    raw(p).execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer Llambda"):
        ChatStore(p)


def test_migration_from_version_1_takes_a_backup_first(tmp_path):
    p = tmp_path / "c.db"
    db = raw(p)
    schema.migrate(db, p, target=1)  # the first layout, as an old Llambda made it
    assert schema.user_version(db) == 1
    db.execute("INSERT INTO conversations (title, model, created, updated) VALUES ('old chat', 'm', 1.0, 2.0)")
    db.execute("INSERT INTO messages (conversation_id, role, content, created) VALUES (1, 'user', 'old words', 1.5)")
    db.execute(
        "INSERT INTO messages (conversation_id, role, content, created) VALUES (1, 'assistant', 'old reply', 1.6)"
    )
    db.close()

    s = ChatStore(p)
    assert s.schema_version == schema.SCHEMA_VERSION
    assert s.backup_path is not None and s.backup_path.name.startswith("c.db.backup-v1-")
    [c] = s.list_conversations()
    assert (c.title, c.model, c.sampling, c.system_prompt, c.damaged) == ("old chat", "m", {}, "", False)
    assert [(m.role, m.content, m.status, m.updated) for m in s.messages(c.id)] == [
        ("user", "old words", "complete", 1.5),
        ("assistant", "old reply", "complete", 1.6),
    ]
    assert [h.message_id for h in s.search("old words")] == [1]  # old text is indexed
    assert s.integrity_check() == []
    s.close()
    b = raw(s.backup_path)  # the backup is the old database, whole
    assert schema.user_version(b) == 1
    assert b.execute("SELECT content FROM messages ORDER BY id").fetchall() == [("old words",), ("old reply",)]
    # opening again neither migrates nor backs up
    s2 = ChatStore(p)
    assert s2.backup_path is None
    s2.close()


def test_failed_migration_leaves_the_old_version(tmp_path, monkeypatch):
    p = tmp_path / "c.db"
    db = raw(p)
    schema.migrate(db, p, target=1)
    db.execute("INSERT INTO conversations (title, created, updated) VALUES ('keep', 1.0, 1.0)")
    db.close()
    monkeypatch.setitem(schema.MIGRATIONS, 1, schema.MIGRATIONS[1] + "\nTHIS IS NOT SQL;")
    with pytest.raises(StoreError, match="left at version 1"):
        ChatStore(p)
    db = raw(p)
    assert schema.user_version(db) == 1
    assert db.execute("SELECT title FROM conversations").fetchall() == [("keep",)]
    assert "system_prompt" not in [r[1] for r in db.execute("PRAGMA table_info(conversations)")]


def test_settings_key_values(store):
    assert store.get_setting("x", 5) == 5
    store.set_setting("x", {"a": [1, 2]})
    store.set_setting("x", {"a": [3]})
    assert store.get_setting("x") == {"a": [3]}


def test_a_corrupted_page_hides_only_its_own_conversation(tmp_path):
    p = tmp_path / "c.db"
    s = ChatStore(p)
    ids = [s.create_conversation(f"conv {i}") for i in range(3)]
    for cid in ids:
        s.add_message(cid, "user", f"hello {cid}")
    victim = ids[1]
    s.update_conversation(victim, system_prompt="Z" * 20000)  # spills onto overflow pages
    s.close()
    db = raw(p)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    data = bytearray(p.read_bytes())
    hit = 0
    for off in range(0, len(data), page):
        if data[off + 4 : off + 200] == b"Z" * 196 and hit == 0:  # an overflow page of the victim
            data[off : off + 4] = (0xFFFFFF00).to_bytes(4, "big")  # its next-page pointer, wrecked
            hit += 1
    assert hit == 1
    p.write_bytes(bytes(data))

    s = ChatStore(p)
    convs = {c.id: c for c in s.list_conversations()}
    assert set(convs) == set(ids)
    assert convs[victim].damaged and not convs[ids[0]].damaged and not convs[ids[2]].damaged
    assert [m.content for m in s.messages(ids[2])] == [f"hello {ids[2]}"]
    assert s.integrity_check() != []  # and the damage is reported, not hidden
    s.close()


def test_untitled_conversation_is_named_after_its_first_question(store):
    from app.chats.store import auto_title

    cid = store.create_conversation()
    store.add_message(cid, "system", "ignored for titles")
    store.add_message(cid, "user", "\n  How do I make bread at home without a mixer, step by step please?\nThanks")
    store.add_message(cid, "user", "second question")
    assert store.get_conversation(cid).title == "How do I make bread at home without a mixer, step by step…"
    named = store.create_conversation("Mine")
    store.add_message(named, "user", "hello")
    assert store.get_conversation(named).title == "Mine"
    assert auto_title("short") == "short" and auto_title("") == ""
    assert len(auto_title("x" * 500)) == 61


def test_threads_and_two_connections_share_the_store(tmp_path):
    import threading

    p = tmp_path / "c.db"
    a, b = ChatStore(p, reply_flush_interval=0), ChatStore(p)  # e.g. the window and the CLI
    cid = a.create_conversation("shared")
    errors = []

    def writer(store, tag):
        try:
            for i in range(30):
                store.add_message(cid, "user", f"{tag} {i}")
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(s, t)) for s, t in ((a, "a"), (a, "a2"), (b, "b"))]
    for t in threads:
        t.start()
    rid = a.begin_reply(cid)
    for k in range(20):
        a.update_reply(rid, "x" * k)
        b.list_conversations()
    a.finish_reply(rid)
    for t in threads:
        t.join()
    assert errors == []
    assert len(b.messages(cid)) == 91
    a.close(), b.close()
