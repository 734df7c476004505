"""Opening the conversation store so that a bad file or folder never stops Llambda, nothing
already written is lost, and nothing is written anywhere the user did not choose.

`open_store()` is how the window opens its store. It always returns a ChatStore; when something
was wrong, `store.notice` says what in one line (the window shows it, and it is logged):

- **The data folder cannot be written** (read-only, on a read-only disk, or it cannot be
  created): the conversations are kept in memory for this session only (`store.saving` is
  False), starting from a copy of the existing database when it can be read. The user sees
  their chats and can keep chatting, and is told once, at start, that nothing is being saved
  and which folder is the cause. Conversations are never written to another folder instead:
  a second copy somewhere the user does not know about is worse than an honest "not saved".
- **The database is damaged** (truncated, a broken page, not SQLite at all): found before
  anything writes to it, by SQLite's own `PRAGMA quick_check` on a read-only connection. The
  file (with its -wal and -shm) is moved aside, unchanged, under a dated name beside it
  (`chats.sqlite3.damaged-2026-12-01T0712`, a `-2` suffix if that is taken; never over another
  file), and a fresh database is started. Whatever can still be read from the damaged copy
  (conversations, messages, settings, row by row) is copied into the fresh one; the copy aside
  is only ever opened read-only.
- **The database was written by a newer Llambda** (its schema version is above
  `SCHEMA_VERSION`): never migrated or "repaired". It is moved aside the same way
  (`chats.sqlite3.newer-<date>`), a fresh, empty database is started, and the user is told that
  the newer Llambda wrote it and where it is.
- **Anything else stops it from opening** (locked by another program, file permissions, a
  failed schema upgrade): the file stays where it is, untouched, and this session is kept in
  memory as for a read-only folder.

No exception escapes `open_store`. What quick_check cannot see: SQLite keeps no checksum of
page contents, so a flipped bit inside a message's text (not in the page's structure) is
read back as a changed character; the store's lenient readers only catch values that no
longer decode.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from typing import Any
from pathlib import Path

from app.chats.schema import SCHEMA_VERSION
from app.chats.store import INTERRUPTED, STREAMING, ChatStore, _decode
from app.errors import StoreError, one_line
from app.paths import chats_db_path, fsync_dir, write_problem

SQLITE_HEADER = b"SQLite format 3\x00"
SIDECARS = ("-wal", "-shm", "-journal")
OK, MISSING, DAMAGED, NEWER, UNREADABLE = "ok", "missing", "damaged", "newer", "unreadable"
_DAMAGE_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (primary result codes)


def _log() -> logging.Logger:
    from app.logs import get

    return get("chats")


@dataclass(frozen=True)
class Verdict:
    state: str  # OK, MISSING, DAMAGED, NEWER or UNREADABLE
    detail: str = ""  # what was found, a few words
    version: int | None = None


def _is_damage(e: sqlite3.Error) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _DAMAGE_CODES
    return isinstance(e, sqlite3.DatabaseError) and any(s in str(e) for s in ("malformed", "not a database"))


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write `path`. `mode=ro` first (it sees the -wal); where the
    folder cannot be written either, `immutable=1` (reads the main file alone)."""
    uri = Path(path).absolute().as_uri()
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=10.0)
        conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.Error as e:
        if _is_damage(e):
            raise
        conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=10.0)
    conn.text_factory = _decode
    return conn


def check(path: str | os.PathLike) -> Verdict:
    """What state the database file is in, found without writing it."""
    path = Path(path)
    if not os.path.lexists(path):
        return Verdict(MISSING)
    if not path.is_file():
        return Verdict(UNREADABLE, "it is not a file")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as e:
        return Verdict(UNREADABLE, e.strerror or str(e))
    if not head:
        return Verdict(OK, "empty")  # SQLite's own empty database: nothing to keep
    if head != SQLITE_HEADER:
        return Verdict(DAMAGED, "not an SQLite database")
    try:
        conn = connect_read_only(path)
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                return Verdict(NEWER, f"schema version {version}", version)
            rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
        finally:
            conn.close()
    except sqlite3.Error as e:
        return Verdict(DAMAGED if _is_damage(e) else UNREADABLE, str(e))
    bad = [r for r in rows if r != "ok"]
    if bad:
        more = f" and {len(bad) - 1} more problems" if len(bad) > 1 else ""
        return Verdict(DAMAGED, one_line(bad[0])[:200] + more, version)
    return Verdict(OK, version=version)


def _aside_name(path: Path, label: str) -> Path:
    stamp = time.strftime("%Y-%m-%dT%H%M")
    n = 1
    while True:
        cand = path.with_name(f"{path.name}.{label}-{stamp}" + (f"-{n}" if n > 1 else ""))
        if not any(os.path.lexists(f"{cand}{s}") for s in ("",) + SIDECARS):
            return cand
        n += 1


def _move(src: Path, dst: Path) -> None:
    """Rename `src` to `dst`, never replacing a file already at `dst`."""
    try:
        os.link(src, dst)  # fails if dst exists: no window for an overwrite
    except FileExistsError:
        raise
    except OSError:  # no hard links here (FAT, some network shares)
        if os.path.lexists(dst):
            raise FileExistsError(f"{dst} already exists") from None
        os.rename(src, dst)
        return
    os.unlink(src)


def set_aside(path: str | os.PathLike, label: str) -> Path:
    """Move the database and its -wal/-shm/-journal beside it, unchanged, to
    `<name>.<label>-<YYYY-MM-DDTHHMM>`; returns the new path of the database.

    The side files go first: if the process dies half-way, the database still has its log or
    loses it to a dated name, never to a fresh database's."""
    path = Path(path)
    target = _aside_name(path, label)
    for s in SIDECARS:
        side = Path(f"{path}{s}")
        if os.path.lexists(side):
            _move(side, Path(f"{target}{s}"))
    _move(path, target)
    fsync_dir(path.parent)
    return target


# -- salvage --------------------------------------------------------------------------------------

_CONV = {
    "id": None,
    "title": "",
    "model": None,
    "system_prompt": "",
    "sampling": "{}",
    "created": 0.0,
    "updated": None,
    "deleted": None,
    "model_sha256": None,
    "model_quant": None,
    "app_version": None,
}
_MSG = {
    "id": None,
    "conversation_id": None,
    "role": "user",
    "content": "",
    "status": "complete",
    "prompt_tokens": None,
    "completion_tokens": None,
    "timings": "{}",
    "model": None,
    "created": 0.0,
    "updated": None,
    "model_sha256": None,
    "model_quant": None,
    "app_version": None,
}


def _ids(conn: sqlite3.Connection, table: str) -> list[int]:
    """Row ids read from both ends of the table, so one broken page in the middle hides only
    the rows on it."""
    found: set[int] = set()
    for order in ("ASC", "DESC"):
        try:
            for (rid,) in conn.execute(f"SELECT id FROM {table} ORDER BY id {order}"):
                if isinstance(rid, int):
                    found.add(rid)
        except sqlite3.Error:
            pass
    return sorted(found)


def _columns(conn: sqlite3.Connection, table: str, wanted: dict) -> list[str]:
    try:
        have = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}
    except sqlite3.Error:
        return []
    return [c for c in wanted if c in have]


def _row(conn: sqlite3.Connection, table: str, cols: list[str], rid: int, defaults: dict) -> dict | None:
    try:
        got = conn.execute(f"SELECT {', '.join(cols)} FROM {table} WHERE id = ?", (rid,)).fetchone()
    except sqlite3.Error:
        return None
    if got is None:
        return None
    row = dict(defaults)
    row.update({c: v for c, v in zip(cols, got) if v is not None})
    if row["updated"] is None:
        row["updated"] = row["created"]
    return row


def _insert(c: sqlite3.Connection, table: str, row: dict) -> None:
    cols = list(row)
    c.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", [row[k] for k in cols])


def salvage(source: str | os.PathLike, store: ChatStore) -> tuple[int, int]:
    """Copy what can still be read of a damaged database into an empty `store`: conversations,
    messages and settings, row by row, with their ids. A row that cannot be read is skipped;
    messages whose conversation row is lost get a conversation named after them. `source` is
    opened read-only. Returns (conversations copied, rows skipped)."""
    try:
        src = connect_read_only(Path(source))
    except sqlite3.Error:
        return 0, 0
    convs = skipped = 0
    try:
        ccols = _columns(src, "conversations", _CONV)
        mcols = _columns(src, "messages", _MSG)
        conv_rows, msg_rows = [], []
        if "id" in ccols:
            for rid in _ids(src, "conversations"):
                r = _row(src, "conversations", ccols, rid, _CONV)
                if r is None:
                    skipped += 1
                else:
                    conv_rows.append(r)
        if {"id", "conversation_id"} <= set(mcols):
            for rid in _ids(src, "messages"):
                r = _row(src, "messages", mcols, rid, _MSG)
                if r is None or not isinstance(r["conversation_id"], int):
                    skipped += 1
                    continue
                if r["status"] == STREAMING:
                    r["status"] = INTERRUPTED
                msg_rows.append(r)
        try:
            settings = src.execute("SELECT key, value FROM settings").fetchall()
        except sqlite3.Error:
            settings = []
    finally:
        src.close()
    known = {r["id"] for r in conv_rows}
    for m in msg_rows:  # messages whose conversation row was lost
        cid = m["conversation_id"]
        if cid not in known:
            known.add(cid)
            conv_rows.append(
                {
                    **_CONV,
                    "id": cid,
                    "title": f"Recovered conversation {cid}",
                    "created": m["created"],
                    "updated": m["updated"],
                }
            )
    with store._tx() as c:
        for table, rows in (("conversations", conv_rows), ("messages", msg_rows)):
            for r in rows:
                try:
                    _insert(c, table, r)
                    convs += table == "conversations"
                except sqlite3.Error:
                    skipped += 1
        for key, value in settings:
            try:
                c.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, value))
            except sqlite3.Error:
                skipped += 1
    return convs, skipped


# -- opening --------------------------------------------------------------------------------------


def _session_only(path: Path, reason: str, kw: dict, seed: bool = True) -> ChatStore:
    """A store in memory: nothing is written to disk. Starts from a read-only copy of `path`
    when `seed` and it can be read."""
    store, shown = None, False
    if seed and path.is_file():
        try:
            conn = connect_read_only(path)
            try:
                store = ChatStore(path, in_memory=True, seed=conn, **kw)
                shown = bool(store.list_conversations(include_deleted=True))
            finally:
                conn.close()
        except (sqlite3.Error, StoreError):
            store = None
    if store is None:
        store = ChatStore(path, in_memory=True, **kw)
    then = (
        "Your conversations are shown, but changes are lost when Llambda closes."
        if shown
        else "Nothing you write is kept after Llambda closes."
    )
    store.notice = one_line(f"Chats are not being saved: {reason}. {then}")
    return store


def _tell(store: ChatStore) -> ChatStore:
    if store.notice:
        _log().warning("%s", store.notice)
    return store


def open_store(path: str | os.PathLike | None = None, **kw: Any) -> ChatStore:
    """The conversation store for the app, whatever state its folder and file are in (see the
    module's docstring). `kw` goes to ChatStore."""
    path = Path(path) if path is not None else chats_db_path()
    try:
        return _tell(_open(path, kw))
    except Exception as e:  # the last resort: still a window, still honest
        _log().error("opening the conversation store failed", exc_info=True)
        return _tell(_session_only(path, f"{path} could not be opened ({type(e).__name__}: {e})", kw, seed=False))


def _open(path: Path, kw: dict) -> ChatStore:
    folder = path.parent
    problem = write_problem(folder)
    if problem is not None:
        return _session_only(path, f"the data folder {folder} cannot be written ({problem})", kw)
    verdict = check(path)
    if verdict.state in (DAMAGED, NEWER):
        try:
            aside = set_aside(path, verdict.state)
        except OSError as e:
            return _session_only(
                path,
                f"the conversation database {path} is {verdict.state} "
                f"({verdict.detail}) and could not be moved aside "
                f"({e.strerror or e})",
                kw,
                seed=False,
            )
        store = ChatStore(path, **kw)
        store.set_aside = aside
        if verdict.state == NEWER:
            store.notice = one_line(
                f"Your conversations were written by a newer Llambda (database schema version "
                f"{verdict.version}; this one reads up to {SCHEMA_VERSION}): they are kept "
                f"unchanged as {aside}, and this version started a new, empty history."
            )
        else:
            saved = 0
            if verdict.detail != "not an SQLite database":
                try:
                    saved, _ = salvage(aside, store)
                except Exception:  # the fresh store stands; the copy aside has it all
                    _log().error("salvaging %s failed", aside, exc_info=True)
            kept = (
                (f" with the {saved} conversation{'s' if saved != 1 else ''} that could still be read") if saved else ""
            )
            store.notice = one_line(
                f"The conversation database was damaged ({verdict.detail}): it is kept unchanged "
                f"as {aside}, and a new one was started{kept}."
            )
        return store
    try:
        return ChatStore(path, **kw)
    except (StoreError, OSError) as e:
        return _session_only(path, str(e), kw)


__all__ = [
    "open_store",
    "check",
    "set_aside",
    "salvage",
    "connect_read_only",
    "Verdict",
    "OK",
    "MISSING",
    "DAMAGED",
    "NEWER",
    "UNREADABLE",
]
