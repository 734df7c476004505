"""Saved KV states without waiting: a `StateKeeper` stands in front of a `KVStore` (kvstore.py)
with a small least-recently-used set of states in memory and one background writer thread.

The engine's thread only takes a snapshot (the token ids and a copy of their cache image, made by
`CDecoder.kv_read`, so the bytes match the tokens whatever the decoder does next) and hands it
over; hashing and writing the file happen on the writer thread. A newer snapshot of the same
conversation replaces one still waiting. Switching back to a conversation whose snapshot is still
in memory restores it from there (no disk read); one that did not fit the memory budget comes
from the disk store. `close()` writes what is pending before it returns.
Not here: the file format and its checks (kvstore.py); when to save (the engine and the worker).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from app.engine.kvstore import KVStore

__all__ = ["StateKeeper", "Snapshot", "DEFAULT_RAM_BUDGET_BYTES"]

log = logging.getLogger(__name__)

DEFAULT_RAM_BUDGET_BYTES = 1 << 30  # states kept in memory for switching back (1 GiB)


@dataclass(frozen=True, eq=False)
class Snapshot:
    """One conversation's KV state at one moment: immutable once made."""

    model_id: str
    key: str
    signature: dict
    tokens: tuple[int, ...]
    image: np.ndarray  # uint8, read-only: positions [0, len(tokens)) of the cache

    @property
    def nbytes(self) -> int:
        return int(self.image.nbytes) + 4 * len(self.tokens)

    def fits(self, signature: dict, n_ctx: int) -> bool:
        return self.signature == signature and 1 <= len(self.tokens) <= n_ctx


class StateKeeper:
    """The `KVStore` interface the engine uses (`unchanged`, `save`, `peek`, `load`), with the
    writes done in the background and recent states kept in memory. `save`, `peek` and `load`
    are called from the engine's thread; `flush`, `close`, `set_budget` from any thread."""

    def __init__(self, store: KVStore | None = None, ram_budget_bytes: int = DEFAULT_RAM_BUDGET_BYTES):
        self.store = store if store is not None else KVStore()
        self.ram_budget_bytes = int(ram_budget_bytes)
        self._cond = threading.Condition()
        self._ram: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()  # oldest first
        self._pending: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
        self._writing: Snapshot | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.written = 0  # snapshots the writer has handed to the store
        self.superseded = 0  # snapshots replaced by a newer one before they were written
        self.memory_hits = 0  # restores served from memory

    # -- the engine's side ----------------------------------------------------------------------

    @property
    def budget_bytes(self) -> int:
        return self.store.budget_bytes

    def set_budget(self, budget_bytes: int) -> None:
        """The disk budget of the store, honoured at once (the least recently used go)."""
        self.store.budget_bytes = max(0, int(budget_bytes))
        self.store.evict()

    def _newest(self, k: tuple[str, str]) -> Snapshot | None:
        """The latest snapshot of k that is still in memory (waiting, being written, or kept)."""
        s = self._pending.get(k)
        if s is None and self._writing is not None and (self._writing.model_id, self._writing.key) == k:
            s = self._writing
        return s if s is not None else self._ram.get(k)

    def unchanged(self, model_id: str, key: str, tokens: Sequence[int]) -> bool:
        toks = tuple(int(t) for t in tokens)
        with self._cond:
            s = self._newest((model_id, key))
        if s is not None:
            return s.tokens == toks
        return self.store.unchanged(model_id, key, toks)

    def save(
        self, model_id: str, key: str, signature: dict, tokens: Sequence[int], image: np.ndarray
    ) -> Snapshot | None:
        """Keep this state and have it written in the background. `image` is handed over: the
        caller's fresh copy (CDecoder.kv_read), never written to again. Returns the snapshot;
        after close(), the state is written here and then (None: not written)."""
        img = np.asarray(image, dtype=np.uint8).reshape(-1)
        img.flags.writeable = False
        snap = Snapshot(model_id, key, dict(signature), tuple(int(t) for t in tokens), img)
        k = (model_id, key)
        with self._cond:
            closed = self._closed
            if not closed:
                if self._pending.pop(k, None) is not None:
                    self.superseded += 1
                self._pending[k] = snap
                self._remember(k, snap)
                self._start()
                self._cond.notify_all()
        if closed:
            return snap if self.store.save(model_id, key, signature, snap.tokens, img) is not None else None
        return snap

    def _remember(self, k: tuple[str, str], snap: Snapshot) -> None:
        """Into the in-memory LRU (under the lock), oldest out while over the budget."""
        self._ram.pop(k, None)
        if snap.nbytes > self.ram_budget_bytes:
            return
        self._ram[k] = snap
        total = sum(s.nbytes for s in self._ram.values())
        while total > self.ram_budget_bytes:
            _, old = self._ram.popitem(last=False)
            total -= old.nbytes

    def peek(self, model_id: str, key: str, signature: dict, n_ctx: int) -> list[int] | None:
        with self._cond:
            s = self._newest((model_id, key))
        if s is not None and s.fits(signature, n_ctx):
            return list(s.tokens)
        return self.store.peek(model_id, key, signature, n_ctx)

    def load(self, model_id: str, key: str, signature: dict, n_ctx: int) -> tuple[list[int], np.ndarray] | None:
        """(tokens, image) from memory when the newest state of key is there, else from disk."""
        k = (model_id, key)
        with self._cond:
            s = self._newest(k)
            if s is not None and s.fits(signature, n_ctx):
                if k in self._ram:
                    self._ram.move_to_end(k)  # recently used
                self.memory_hits += 1
                return list(s.tokens), s.image
        return self.store.load(model_id, key, signature, n_ctx)

    def forget_memory(self) -> None:
        """Drop the states kept in memory (a model change: they belong to the old model). What
        waits to be written is still written."""
        with self._cond:
            self._ram.clear()

    def memory_bytes(self) -> int:
        """Bytes of the states held in memory (kept, waiting or being written; each once)."""
        with self._cond:
            held = {id(s): s for s in (*self._ram.values(), *self._pending.values(), self._writing) if s}
        return sum(s.nbytes for s in held.values())

    # -- the writer ---------------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="llambda-kv-writer", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                _, snap = self._pending.popitem(last=False)
                self._writing = snap
            try:
                self.store.save(snap.model_id, snap.key, snap.signature, snap.tokens, snap.image)
            except Exception:  # the store logs what it expects (OSError); anything else too
                log.warning("KV state %r not saved", snap.key, exc_info=True)
            finally:
                with self._cond:
                    self._writing = None
                    self.written += 1
                    self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every state handed over is written; False if `timeout` came first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and self._writing is None, timeout)

    def close(self, timeout: float | None = 120.0) -> bool:
        """Write what is pending, stop the writer; later saves are written synchronously. False
        (logged) if the writes did not end within `timeout` (the temporary file a killed write
        leaves is removed by a later eviction; the old state file stays valid)."""
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(None if done else 1.0)
        if not done:
            log.warning("KV states still being written after %.0f s at close", timeout or 0)
        return done
