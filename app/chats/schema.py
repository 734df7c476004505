"""The conversation database's schema and its migrations, versioned by `PRAGMA user_version`.

Each step takes the database from version k to k+1 inside one transaction (SQLite DDL is
transactional), so a crash mid-migration leaves the old version intact. Before upgrading a
database that already holds data, `migrate` copies it aside with SQLite's online backup
(`chats.sqlite3.backup-v<k>-<time>`). A database from a newer Llambda is never touched.

History: v1 was the first layout (conversations and messages); v2 added the system prompt,
sampling settings, soft delete, message status, token counts, timings, the model per message,
the settings table and full-text search (FTS5, external content kept in step by triggers); v3
added which model answered (file SHA-256, quantization) and the app version, per reply and for
the conversation's latest reply.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from app.errors import StoreError

SCHEMA_VERSION = 3

_V1 = """
CREATE TABLE conversations (
    id       INTEGER PRIMARY KEY,
    title    TEXT NOT NULL DEFAULT '',
    model    TEXT,
    created  REAL NOT NULL,
    updated  REAL NOT NULL
);
CREATE TABLE messages (
    id               INTEGER PRIMARY KEY,
    conversation_id  INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role             TEXT NOT NULL,
    content          TEXT NOT NULL DEFAULT '',
    created          REAL NOT NULL
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
"""

_V2 = """
ALTER TABLE conversations ADD COLUMN system_prompt TEXT NOT NULL DEFAULT '';
ALTER TABLE conversations ADD COLUMN sampling TEXT NOT NULL DEFAULT '{}';
ALTER TABLE conversations ADD COLUMN deleted REAL;
CREATE INDEX conversations_by_updated ON conversations(deleted, updated);
ALTER TABLE messages ADD COLUMN status TEXT NOT NULL DEFAULT 'complete';
ALTER TABLE messages ADD COLUMN prompt_tokens INTEGER;
ALTER TABLE messages ADD COLUMN completion_tokens INTEGER;
ALTER TABLE messages ADD COLUMN timings TEXT NOT NULL DEFAULT '{}';
ALTER TABLE messages ADD COLUMN model TEXT;
ALTER TABLE messages ADD COLUMN updated REAL;
UPDATE messages SET updated = created;
CREATE TABLE settings (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id');
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
"""

_V3 = """
ALTER TABLE conversations ADD COLUMN model_sha256 TEXT;
ALTER TABLE conversations ADD COLUMN model_quant TEXT;
ALTER TABLE conversations ADD COLUMN app_version TEXT;
ALTER TABLE messages ADD COLUMN model_sha256 TEXT;
ALTER TABLE messages ADD COLUMN model_quant TEXT;
ALTER TABLE messages ADD COLUMN app_version TEXT;
"""

# MIGRATIONS[k] takes a database from version k to k + 1.
MIGRATIONS: dict[int, str] = {0: _V1, 1: _V2, 2: _V3}


def user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _has_tables(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] > 0


def backup(conn: sqlite3.Connection, db_path: Path, version: int) -> Path:
    """Copy the live database aside with SQLite's backup API; returns the copy's path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = db_path.with_name(f"{db_path.name}.backup-v{version}-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = db_path.with_name(f"{db_path.name}.backup-v{version}-{stamp}-{n}")
    dest = sqlite3.connect(target)
    try:
        conn.backup(dest)
    finally:
        dest.close()
    return target


def migrate(conn: sqlite3.Connection, db_path: Path | None, target: int = SCHEMA_VERSION) -> Path | None:
    """Bring the schema to `target`; returns the backup's path when one was taken.

    `conn` must be in autocommit mode (isolation_level=None).
    """
    version = user_version(conn)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{db_path}: made by a newer Llambda (schema version {version}; this "
            f"version knows up to {SCHEMA_VERSION}); it was left untouched"
        )
    if version >= target:
        return None
    saved = None
    if db_path is not None and _has_tables(conn):
        try:
            saved = backup(conn, Path(db_path), version)
        except (sqlite3.Error, OSError) as e:
            raise StoreError(
                f"{db_path}: could not back up before upgrading the schema "
                f"(from version {version}): {e}; nothing was changed"
            ) from None
    for k in range(version, target):
        try:
            conn.executescript(f"BEGIN IMMEDIATE;\n{MIGRATIONS[k]}\nPRAGMA user_version = {k + 1};\nCOMMIT;")
        except sqlite3.Error as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StoreError(
                f"{db_path}: schema upgrade from version {k} to {k + 1} failed: {e}; "
                "the database was left at version "
                f"{k}"
            ) from None
    return saved


__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "migrate", "backup", "user_version"]
