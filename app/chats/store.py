"""The conversation store: SQLite (WAL, foreign keys, full sync) in the user data folder.

Everything is written as it happens, each change in its own transaction: a user's message at
once; a streaming reply when it begins, then at most every `reply_flush_interval` seconds (1 by
default) and when it finishes. Killing the process loses at most the tail of the reply in
flight; on the next open a reply left streaming is marked "interrupted". Rows are read one at a
time and decoded leniently, so one damaged row shows as damaged and never hides the others.
Delete is soft (undo with `restore_conversation`); `purge_deleted` removes for good.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from app import __version__
from app.chats.schema import SCHEMA_VERSION, migrate
from app.errors import StoreError
from app.paths import chats_db_path, ensure_dir

ROLES = ("system", "user", "assistant", "tool")
STREAMING, COMPLETE, INTERRUPTED, ERROR = "streaming", "complete", "interrupted", "error"
TOKEN_KEYS = ("prompt_tokens", "completion_tokens")


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    model: str | None
    system_prompt: str
    sampling: dict
    created: float
    updated: float
    deleted: float | None = None
    damaged: bool = False  # some field could not be read; shown with placeholders
    model_sha256: str | None = None  # the model of the latest reply (schema v3)
    model_quant: str | None = None
    app_version: str | None = None


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    role: str
    content: str
    status: str
    prompt_tokens: int | None
    completion_tokens: int | None
    timings: dict
    model: str | None
    created: float
    updated: float
    damaged: bool = False
    model_sha256: str | None = None  # which file answered (schema v3), and with which Llambda
    model_quant: str | None = None
    app_version: str | None = None


@dataclass(frozen=True)
class SearchHit:
    conversation_id: int
    message_id: int
    title: str
    role: str
    snippet: str


def auto_title(text: str, limit: int = 60) -> str:
    """A title from a first message: its first non-empty line, cut at a word near `limit`."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0] if " " in line[:limit] else line[:limit]
    return cut.rstrip(" ,.;:") + "…"


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "replace")


class _Lenient:
    """Field readers that never raise: a bad value becomes a placeholder and marks the row."""

    def __init__(self) -> None:
        self.damaged = False

    def text(self, v: Any, default: str = "") -> str:
        if isinstance(v, str):
            return v
        if v is None:
            return default
        self.damaged = True
        return _decode(v) if isinstance(v, bytes) else str(v)

    def opt_text(self, v: Any) -> str | None:
        return None if v is None else self.text(v)

    def number(self, v: Any, default: float = 0.0) -> float:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
        self.damaged = True
        return default

    def opt_int(self, v: Any) -> int | None:
        if v is None or (isinstance(v, int) and not isinstance(v, bool)):
            return v
        self.damaged = True
        return None

    def json_dict(self, v: Any) -> dict:
        try:
            d = json.loads(v) if isinstance(v, (str, bytes)) else None
        except ValueError:
            d = None
        if not isinstance(d, dict):
            self.damaged = True
            return {}
        return d


class ChatStore:
    """Conversations and messages in one SQLite file (default: `app.paths.chats_db_path()`).

    Safe to share between threads (one connection behind a lock). Use as a context manager or
    call `close()`.

    The constructor is strict: a file it cannot read raises StoreError and is left untouched.
    The app opens its store with `app.chats.recovery.open_store`, which checks the file first,
    sets a damaged or newer one aside and always returns a store (`notice` then says what
    happened, in one line).

    `in_memory=True` keeps everything in this process's memory and writes nothing to disk
    (`saving` is False; `path` is only where the conversations would have been); `seed`, an open
    sqlite3 connection, is copied in first (the conversations of a folder that cannot be
    written, shown but not saved).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        reply_flush_interval: float = 1.0,
        stale_stream_after: float = 10.0,
        in_memory: bool = False,
        seed: sqlite3.Connection | None = None,
    ):
        self.path = Path(path) if path is not None else chats_db_path()
        self.reply_flush_interval = reply_flush_interval
        self.backup_path: Path | None = None
        self.saving = not in_memory
        self.notice: str | None = None  # one line for the user (set by open_store)
        self.set_aside: Path | None = None  # where a damaged or newer file was moved (open_store)
        self._lock = threading.RLock()
        self._pending: dict[int, tuple[str, float, bool]] = {}  # msg id -> (text, last write, dirty)
        if not in_memory:
            ensure_dir(self.path.parent)
        self._conn: sqlite3.Connection | None  # None once closed
        try:
            self._conn = sqlite3.connect(
                ":memory:" if in_memory else self.path, isolation_level=None, check_same_thread=False, timeout=10.0
            )
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: cannot open the conversation database: {e}") from None
        try:
            self._conn.text_factory = _decode
            if in_memory:
                if seed is not None:
                    seed.backup(self._conn)
            else:
                self._conn.execute("PRAGMA busy_timeout = 10000")
                mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self.path}: cannot switch the database to WAL mode (got {mode})")
                self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self.backup_path = migrate(self._conn, None if in_memory else self.path)
            self._recover_streaming(stale_stream_after)
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise StoreError(
                f"{self.path}: the conversation database cannot be read ({e}); it was left untouched"
            ) from None
        except BaseException:
            self._conn.close()
            raise

    # -- plumbing ------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._conn is None:
                return
            try:
                self.flush()
            finally:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "ChatStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                raise StoreError(f"{self.path}: the conversation store is closed")
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                yield self._conn
                self._conn.execute("COMMIT")
            except sqlite3.Error as e:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise StoreError(f"{self.path}: write failed: {e}") from None
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            if self._conn is None:
                raise StoreError(f"{self.path}: the conversation store is closed")
            try:
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.Error as e:
                raise StoreError(f"{self.path}: read failed: {e}") from None

    def _recover_streaming(self, stale_after: float) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE messages SET status = ? WHERE status = ? AND (updated IS NULL OR updated < ?)",
                (INTERRUPTED, STREAMING, time.time() - stale_after),
            )

    @property
    def schema_version(self) -> int:
        return int(self._read("PRAGMA user_version")[0][0])

    def integrity_check(self) -> list[str]:
        """SQLite's own check plus the full-text index's; an empty list means healthy."""
        rows = [r[0] for r in self._read("PRAGMA integrity_check")]
        problems = [r for r in rows if r != "ok"]
        problems += [f"foreign key: {r}" for r in self._read("PRAGMA foreign_key_check")]
        try:
            with self._tx() as c:
                c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
        except StoreError as e:
            problems.append(f"full-text index: {e}")
        return problems

    # -- conversations -------------------------------------------------------------------------

    def create_conversation(
        self, title: str = "", model: str | None = None, system_prompt: str = "", sampling: Mapping | None = None
    ) -> int:
        now = time.time()
        with self._tx() as c:
            cur = c.execute(
                "INSERT INTO conversations (title, model, system_prompt, sampling, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (title, model, system_prompt, json.dumps(dict(sampling or {}), sort_keys=True), now, now),
            )
            return int(cur.lastrowid)  # type: ignore[arg-type]  # set by the INSERT just made

    def _conversation_from_row(self, row: tuple) -> Conversation:
        r = _Lenient()
        d: dict[str, Any] = dict(
            id=int(row[0]),
            title=r.text(row[1]),
            model=r.opt_text(row[2]),
            system_prompt=r.text(row[3]),
            sampling=r.json_dict(row[4]),
            created=r.number(row[5]),
            updated=r.number(row[6]),
            deleted=None if row[7] is None else r.number(row[7]),
            model_sha256=r.opt_text(row[8]),
            model_quant=r.opt_text(row[9]),
            app_version=r.opt_text(row[10]),
        )
        return Conversation(**d, damaged=r.damaged)

    _CONV_COLUMNS = (
        "id, title, model, system_prompt, sampling, created, updated, deleted, model_sha256, model_quant, app_version"
    )

    def _damaged_conversation(self, conv_id: int) -> Conversation:
        return Conversation(
            id=conv_id,
            title=f"(damaged conversation {conv_id})",
            model=None,
            system_prompt="",
            sampling={},
            created=0.0,
            updated=0.0,
            damaged=True,
        )

    def get_conversation(self, conv_id: int) -> Conversation:
        try:
            rows = self._read(f"SELECT {self._CONV_COLUMNS} FROM conversations WHERE id = ?", (conv_id,))
        except StoreError:
            return self._damaged_conversation(conv_id)
        if not rows:
            raise StoreError(f"no conversation {conv_id}")
        return self._conversation_from_row(rows[0])

    def list_conversations(self, include_deleted: bool = False, deleted_only: bool = False) -> list[Conversation]:
        """Conversations, most recently updated first. A row that cannot be read is listed as
        damaged rather than hiding the others."""
        where = "deleted IS NOT NULL" if deleted_only else ("1" if include_deleted else "deleted IS NULL")
        ids = [
            int(r[0]) for r in self._read(f"SELECT id FROM conversations WHERE {where} ORDER BY updated DESC, id DESC")
        ]
        out = []
        for conv_id in ids:
            try:
                out.append(self.get_conversation(conv_id))
            except StoreError:
                out.append(self._damaged_conversation(conv_id))
        return out

    def _touch(self, c: sqlite3.Connection, conv_id: int, now: float | None = None) -> None:
        c.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now or time.time(), conv_id))

    def update_conversation(
        self,
        conv_id: int,
        *,
        title: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        sampling: Mapping | None = None,
    ) -> None:
        sets, args = [], []
        for col, val in (("title", title), ("model", model), ("system_prompt", system_prompt)):
            if val is not None:
                sets.append(f"{col} = ?")
                args.append(val)
        if sampling is not None:
            sets.append("sampling = ?")
            args.append(json.dumps(dict(sampling), sort_keys=True))
        if not sets:
            return
        with self._tx() as c:
            cur = c.execute(
                f"UPDATE conversations SET {', '.join(sets)}, updated = ? WHERE id = ?", (*args, time.time(), conv_id)
            )
            if cur.rowcount == 0:
                raise StoreError(f"no conversation {conv_id}")

    def rename_conversation(self, conv_id: int, title: str) -> None:
        self.update_conversation(conv_id, title=title)

    def delete_conversation(self, conv_id: int) -> None:
        """Move to the bin (undo with `restore_conversation`)."""
        with self._tx() as c:
            if c.execute("UPDATE conversations SET deleted = ? WHERE id = ?", (time.time(), conv_id)).rowcount == 0:
                raise StoreError(f"no conversation {conv_id}")

    def restore_conversation(self, conv_id: int) -> None:
        with self._tx() as c:
            if c.execute("UPDATE conversations SET deleted = NULL WHERE id = ?", (conv_id,)).rowcount == 0:
                raise StoreError(f"no conversation {conv_id}")

    def purge_deleted(self, older_than: float = 0.0) -> int:
        """Remove for good conversations deleted more than `older_than` seconds ago."""
        with self._tx() as c:
            return c.execute(
                "DELETE FROM conversations WHERE deleted IS NOT NULL AND deleted <= ?", (time.time() - older_than,)
            ).rowcount

    # -- messages ------------------------------------------------------------------------------

    def add_message(
        self,
        conv_id: int,
        role: str,
        content: str,
        *,
        model: str | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        timings: Mapping | None = None,
    ) -> int:
        """Append a complete message, committed before this returns. The first user message of
        an untitled conversation gives it its title (`auto_title`)."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        now = time.time()
        with self._tx() as c:
            try:
                cur = c.execute(
                    "INSERT INTO messages (conversation_id, role, content, status, prompt_tokens, "
                    "completion_tokens, timings, model, created, updated) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        conv_id,
                        role,
                        content,
                        COMPLETE,
                        prompt_tokens,
                        completion_tokens,
                        json.dumps(dict(timings or {}), sort_keys=True),
                        model,
                        now,
                        now,
                    ),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"no conversation {conv_id}") from None
            self._touch(c, conv_id, now)
            if role == "user":  # an untitled conversation is named after its first question
                c.execute(
                    "UPDATE conversations SET title = ? WHERE id = ? AND title = ''", (auto_title(content), conv_id)
                )
            return int(cur.lastrowid)  # type: ignore[arg-type]  # set by the INSERT just made

    def _message_from_row(self, row: tuple) -> Message:
        r = _Lenient()
        role = r.text(row[2], "user")
        if role not in ROLES:
            r.damaged = True
        m: dict[str, Any] = dict(
            id=int(row[0]),
            conversation_id=int(row[1]),
            role=role,
            content=r.text(row[3]),
            status=r.text(row[4], COMPLETE),
            prompt_tokens=r.opt_int(row[5]),
            completion_tokens=r.opt_int(row[6]),
            timings=r.json_dict(row[7]),
            model=r.opt_text(row[8]),
            created=r.number(row[9]),
            updated=r.number(row[10] if row[10] is not None else row[9]),
            model_sha256=r.opt_text(row[11]),
            model_quant=r.opt_text(row[12]),
            app_version=r.opt_text(row[13]),
        )
        return Message(**m, damaged=r.damaged)

    _MSG_COLUMNS = (
        "id, conversation_id, role, content, status, prompt_tokens, completion_tokens, "
        "timings, model, created, updated, model_sha256, model_quant, app_version"
    )

    def messages(self, conv_id: int) -> list[Message]:
        """The messages of a conversation in order; unreadable rows come back marked damaged."""
        ids = [
            int(r[0]) for r in self._read("SELECT id FROM messages WHERE conversation_id = ? ORDER BY id", (conv_id,))
        ]
        out = []
        for mid in ids:
            try:
                rows = self._read(f"SELECT {self._MSG_COLUMNS} FROM messages WHERE id = ?", (mid,))
                if rows:
                    out.append(self._message_from_row(rows[0]))
            except StoreError:
                out.append(
                    Message(
                        mid,
                        conv_id,
                        "assistant",
                        "(this message could not be read)",
                        ERROR,
                        None,
                        None,
                        {},
                        None,
                        0.0,
                        0.0,
                        damaged=True,
                    )
                )
        return out

    def get_message(self, msg_id: int) -> Message:
        rows = self._read(f"SELECT {self._MSG_COLUMNS} FROM messages WHERE id = ?", (msg_id,))
        if not rows:
            raise StoreError(f"no message {msg_id}")
        return self._message_from_row(rows[0])

    def delete_message(self, msg_id: int) -> None:
        with self._tx() as c:
            c.execute("DELETE FROM messages WHERE id = ?", (msg_id,))
        self._pending.pop(msg_id, None)

    # -- streaming replies ---------------------------------------------------------------------

    def begin_reply(self, conv_id: int, model: str | None = None, role: str = "assistant") -> int:
        """Start an empty reply marked streaming; committed before this returns."""
        now = time.time()
        with self._tx() as c:
            try:
                cur = c.execute(
                    "INSERT INTO messages (conversation_id, role, content, status, model, created, updated) "
                    "VALUES (?, ?, '', ?, ?, ?, ?)",
                    (conv_id, role, STREAMING, model, now, now),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"no conversation {conv_id}") from None
            self._touch(c, conv_id, now)
            msg_id = int(cur.lastrowid)  # type: ignore[arg-type]  # set by the INSERT just made
        with self._lock:
            self._pending[msg_id] = ("", time.monotonic(), False)
        return msg_id

    def _write_reply(self, msg_id: int, text: str) -> None:
        with self._tx() as c:
            c.execute("UPDATE messages SET content = ?, updated = ? WHERE id = ?", (text, time.time(), msg_id))

    def update_reply(self, msg_id: int, text: str, force: bool = False) -> bool:
        """The reply's whole text so far. Written when `reply_flush_interval` seconds have passed
        since the last write (or `force`); returns True when it was written now."""
        with self._lock:
            _, last, _ = self._pending.get(msg_id, ("", 0.0, False))
            now = time.monotonic()
            if force or now - last >= self.reply_flush_interval:
                try:
                    self._write_reply(msg_id, text)
                except StoreError:  # (a full disk) tried again after the interval, or at the end
                    self._pending[msg_id] = (text, now, True)
                    raise
                self._pending[msg_id] = (text, now, False)
                return True
            self._pending[msg_id] = (text, last, True)
            return False

    def flush(self) -> None:
        """Write every reply text not yet written (call from a timer if tokens may stall)."""
        with self._lock:
            for msg_id, (text, _, dirty) in list(self._pending.items()):
                if dirty:
                    self._write_reply(msg_id, text)
                    self._pending[msg_id] = (text, time.monotonic(), False)

    def finish_reply(
        self, msg_id: int, stats: Mapping | None = None, text: str | None = None, status: str = COMPLETE
    ) -> None:
        """Final text (default: the last given to update_reply), token counts and timings.

        `stats` may carry prompt_tokens and completion_tokens; every other key goes to timings.
        `status` may be "complete", "interrupted" (stopped by the user) or "error".
        """
        if status not in (COMPLETE, INTERRUPTED, ERROR):
            raise ValueError(f"unknown reply status {status!r}")
        stats = dict(stats or {})
        tokens = {k: stats.pop(k, None) for k in TOKEN_KEYS}
        with self._lock:
            pending = self._pending.pop(msg_id, None)
            if text is None and pending is not None:
                text = pending[0]
            with self._tx() as c:
                sets = "status = ?, prompt_tokens = ?, completion_tokens = ?, timings = ?, updated = ?"
                args = [
                    status,
                    tokens["prompt_tokens"],
                    tokens["completion_tokens"],
                    json.dumps(stats, sort_keys=True),
                    time.time(),
                ]
                if text is not None:
                    sets += ", content = ?"
                    args.append(text)
                if c.execute(f"UPDATE messages SET {sets} WHERE id = ?", (*args, msg_id)).rowcount == 0:
                    raise StoreError(f"no message {msg_id}")
                row = c.execute("SELECT conversation_id FROM messages WHERE id = ?", (msg_id,)).fetchone()
                self._touch(c, row[0])

    def record_model(
        self,
        msg_id: int,
        *,
        name: str | None,
        sha256: str | None,
        quantization: str | None,
        app_version: str | None = None,
    ) -> None:
        """Which model file answered this reply (and with which Llambda); the reply's
        conversation takes the same as its latest model."""
        if app_version is None:
            app_version = __version__
        ident = (name, sha256, quantization, app_version)
        with self._tx() as c:
            if (
                c.execute(
                    "UPDATE messages SET model = coalesce(?, model), model_sha256 = ?, "
                    "model_quant = ?, app_version = ? WHERE id = ?",
                    (*ident, msg_id),
                ).rowcount
                == 0
            ):
                raise StoreError(f"no message {msg_id}")
            c.execute(
                "UPDATE conversations SET model = coalesce(?, model), model_sha256 = ?, "
                "model_quant = ?, app_version = ? WHERE id = "
                "(SELECT conversation_id FROM messages WHERE id = ?)",
                (*ident, msg_id),
            )

    # -- search --------------------------------------------------------------------------------

    @staticmethod
    def fts_query(text: str) -> str | None:
        """Words of `text` as an FTS5 query (all words, the last as a prefix); None if no words."""
        words = re.findall(r"\w+", text, flags=re.UNICODE)
        if not words:
            return None
        quoted = [f'"{w}"' for w in words]
        quoted[-1] += "*"
        return " ".join(quoted)

    def search(self, text: str, limit: int = 50) -> list[SearchHit]:
        """Messages that contain every word of `text`, best first, outside the bin."""
        q = self.fts_query(text)
        if q is None:
            return []
        rows = self._read(
            "SELECT m.conversation_id, m.id, c.title, m.role, "
            "snippet(messages_fts, 0, '[', ']', '…', 12) "
            "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
            "JOIN conversations c ON c.id = m.conversation_id "
            "WHERE messages_fts MATCH ? AND c.deleted IS NULL ORDER BY rank LIMIT ?",
            (q, limit),
        )
        r = _Lenient()
        return [SearchHit(int(a), int(b), r.text(t), r.text(role), r.text(s)) for a, b, t, role, s in rows]

    # -- settings (key -> JSON), used by app.chats.settings when it lives in the store ----------

    def get_setting(self, key: str, default: Any = None) -> Any:
        rows = self._read("SELECT value FROM settings WHERE key = ?", (key,))
        if not rows:
            return default
        try:
            return json.loads(rows[0][0])
        except (ValueError, TypeError):
            return default

    def set_setting(self, key: str, value: Any) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, json.dumps(value)),
            )


__all__ = [
    "ChatStore",
    "Conversation",
    "Message",
    "SearchHit",
    "ROLES",
    "SCHEMA_VERSION",
    "STREAMING",
    "COMPLETE",
    "INTERRUPTED",
    "ERROR",
]
