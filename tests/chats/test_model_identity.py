"""Schema v3: each reply (and its conversation) records which model file answered — SHA-256,
name, quantization — and the Llambda version; a v2 database is backed up, then upgraded."""

from __future__ import annotations

import sqlite3

from app import __version__
from app.chats import ChatStore, schema
from app.ui.about import identity_tooltip

SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def raw(path):
    return sqlite3.connect(path, isolation_level=None)


def test_version_2_database_is_backed_up_then_gains_the_identity_columns(tmp_path):
    p = tmp_path / "c.db"
    db = raw(p)
    schema.migrate(db, p, target=2)  # as the previous Llambda left it
    db.execute("INSERT INTO conversations (title, model, created, updated) VALUES ('old', 'm', 1.0, 2.0)")
    db.execute(
        "INSERT INTO messages (conversation_id, role, content, created, model) "
        "VALUES (1, 'assistant', 'old reply', 1.5, 'm')"
    )
    db.close()

    with ChatStore(p) as s:
        assert s.schema_version == schema.SCHEMA_VERSION == 3
        assert s.backup_path is not None and s.backup_path.name.startswith("c.db.backup-v2-")
        [m] = s.messages(1)
        assert (m.content, m.model, m.model_sha256, m.model_quant, m.app_version) == (
            "old reply",
            "m",
            None,
            None,
            None,
        )
        assert identity_tooltip(m) == ""  # nothing recorded: no hover text
        assert s.integrity_check() == []
    b = raw(s.backup_path)
    assert schema.user_version(b) == 2
    assert b.execute("SELECT content FROM messages").fetchall() == [("old reply",)]


def test_a_reply_records_the_model_and_the_conversation_follows(tmp_path):
    with ChatStore(tmp_path / "c.db") as s:
        conv = s.create_conversation("t")
        s.add_message(conv, "user", "hi")
        mid = s.begin_reply(conv, model="SmolLM2")
        s.record_model(mid, name="SmolLM2", sha256=SHA, quantization="Q4_1")
        s.finish_reply(mid, {}, text="hello")
        m = s.get_message(mid)
        assert (m.model, m.model_sha256, m.model_quant, m.app_version) == ("SmolLM2", SHA, "Q4_1", __version__)
        c = s.get_conversation(conv)
        assert (c.model, c.model_sha256, c.model_quant, c.app_version) == ("SmolLM2", SHA, "Q4_1", __version__)
        tip = identity_tooltip(m)
        assert tip.startswith("Answered by SmolLM2") and "Q4_1" in tip and SHA[:16] in tip
        assert f"Llambda {__version__}" in tip
