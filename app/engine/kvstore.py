"""Saved KV caches: a conversation's decoder state kept in the cache folder, so that reopening it
(or switching back to it) decodes only what is new instead of re-reading the whole prompt.

One file per (model, conversation key) in `cache_dir()/kv/`, named by a hash of both:

    offset  what
    0       magic b"LLKVSAVE", then u32 format version, u32 header length H (little-endian)
    16      header: H bytes of UTF-8 JSON (engine version, model identity, the decoder's KV
            signature: kv type, layers, KV heads, head size, rope factors; n_tokens; image bytes)
    16+H    n_tokens int32 token ids (position = index)
    ...     the cache image of those positions (CDecoder.kv_read: per layer K rows, then V rows)
    end-32  SHA-256 of everything before it

A file is a cache, never the truth: anything that does not match (another model, engine or
format version, KV type, a checksum, a length, a file that is not a regular file) is ignored with
a log line and the prompt is decoded as if there were no file. Writes go to a temporary file in
the same folder, fsynced, then renamed over the old one: a killed writer leaves the old file or
the new one. The folder is kept under a size budget (default 2 GB, a setting of the window),
least recently used first.
Not here: when to save or restore (engine.py and the window's worker decide).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from app import __version__, defaults as D, kernels
from app.paths import cache_dir, fsync_dir

log = logging.getLogger(__name__)

__all__ = ["KVStore", "model_identity", "FORMAT_VERSION", "DEFAULT_BUDGET_BYTES"]

MAGIC = b"LLKVSAVE"
# 2: the q8_0 cache holds its keys and values Hadamard-rotated (kernels/llk_decode.c), so an older
# q8_0 image would give wrong answers; every older file is ignored and its prompt re-read
FORMAT_VERSION = 2
DEFAULT_BUDGET_BYTES = D.KV_BUDGET_MB << 20  # 2 GiB; the window's setting changes it
SUFFIX = ".llkv"
MAX_HEADER = 64 * 1024
STALE_TMP_S = 3600  # temporary files older than this are a killed writer's leftovers
_PRE = struct.Struct("<8sII")
_DIGEST = 32


def engine_version() -> str:
    """The Python package and kernel library versions: a saved image is only as good as both."""
    return f"{__version__}/{kernels.version()}"


_identities: dict[tuple, str] = {}


def model_identity(path: str | os.PathLike) -> str:
    """A model file's identity: the library's verified SHA-256 when the file is a library copy
    (named `<sha256>.gguf`), else a SHA-256 over its size and 64 samples of 64 KB spread over the
    whole file (including its first and last MB): cheap on a multi-GB file, and different for any
    other model or quantization."""
    p = Path(path)
    st = p.stat()
    stem = p.stem.lower()
    if len(stem) == 64 and all(c in "0123456789abcdef" for c in stem):
        return "sha256:" + stem
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key in _identities:
        return _identities[key]
    h = hashlib.sha256(str(st.st_size).encode())
    with open(p, "rb") as f:
        h.update(f.read(1 << 20))
        size = st.st_size
        for i in range(64):
            f.seek(size * i // 64)
            h.update(f.read(1 << 16))
        f.seek(max(0, size - (1 << 20)))
        h.update(f.read(1 << 20))
    ident = "sampled:" + h.hexdigest()
    _identities[key] = ident
    return ident


class KVStore:
    """The folder of saved KV caches. Its calls may come from two threads (the engine's, and the
    background writer of kvkeeper.py); the bookkeeping of what was written, and eviction, are
    under one lock. `budget_bytes` may be changed at any time; `evict()` then applies it."""

    def __init__(self, folder: str | os.PathLike | None = None, budget_bytes: int = DEFAULT_BUDGET_BYTES):
        if folder is None:
            folder = cache_dir() / "kv"
        self.folder = Path(folder)
        self.budget_bytes = int(budget_bytes)
        self._saved: dict[str, tuple[int, ...]] = {}  # file name -> tokens written this run
        self._lock = threading.RLock()

    def path_for(self, model_id: str, key: str) -> Path:
        name = hashlib.sha256(f"{model_id}\0{key}".encode()).hexdigest()[:40]
        return self.folder / (name + SUFFIX)

    # -- writing ------------------------------------------------------------------------------

    def unchanged(self, model_id: str, key: str, tokens: Sequence[int]) -> bool:
        """True when this store wrote exactly these tokens under key and the file is still there."""
        path = self.path_for(model_id, key)
        with self._lock:
            saved = self._saved.get(path.name)
        return saved == tuple(int(t) for t in tokens) and path.is_file()

    def save(self, model_id: str, key: str, signature: dict, tokens: Sequence[int], image: np.ndarray) -> Path | None:
        """Write a state (atomically); None when it was not written (too big for the budget,
        unchanged since the last save, or the folder refused: logged)."""
        path = self.path_for(model_id, key)
        toks = np.ascontiguousarray(tokens, dtype="<i4")
        img = np.ascontiguousarray(image, dtype=np.uint8).reshape(-1)
        if self.unchanged(model_id, key, toks.tolist()):
            return None
        header = json.dumps(
            {
                "engine": engine_version(),
                "model": model_id,
                "key": key,
                "signature": signature,
                "n_tokens": int(toks.size),
                "image_bytes": int(img.size),
                "saved": time.time(),
            },
            sort_keys=True,
        ).encode()
        total = _PRE.size + len(header) + toks.nbytes + img.size + _DIGEST
        if total > self.budget_bytes:
            log.info(
                "KV state of %d tokens (%d bytes) is over the cache budget of %d bytes: not saved",
                toks.size,
                total,
                self.budget_bytes,
            )
            return None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            view = memoryview(img)  # type: ignore[arg-type]  # numpy: 3.12+
            self._write_atomic(path, [_PRE.pack(MAGIC, FORMAT_VERSION, len(header)), header, toks.tobytes(), view])
        except OSError as e:
            log.warning("KV state not saved to %s: %s", path, e)
            return None
        with self._lock:
            self._saved[path.name] = tuple(toks.tolist())
            self.evict(keep=path)
        return path

    @staticmethod
    def _write_atomic(path: Path, parts: list) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "wb") as f:
                for part in parts:
                    h.update(part)
                    f.write(part)
                f.write(h.digest())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)  # over a directory: IsADirectoryError, the caller logs it
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        fsync_dir(path.parent)

    def evict(self, keep: Path | None = None) -> None:
        """Delete the least recently used states until the folder fits the budget (and any
        temporary file a killed writer left behind long ago)."""
        with self._lock:
            self._evict(keep)

    def _evict(self, keep: Path | None) -> None:
        files = []
        now = time.time()
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if e.name.endswith(".tmp") and e.name.startswith(".") and now - st.st_mtime > STALE_TMP_S:
                _unlink(Path(e.path))
            elif e.name.endswith(SUFFIX):
                files.append((st.st_mtime, st.st_size, Path(e.path)))
        total = sum(size for _, size, _ in files)
        for _, size, p in sorted(files):
            if total <= self.budget_bytes:
                break
            if keep is not None and p.name == keep.name:
                continue
            log.info("KV cache budget: removing %s (%d bytes)", p.name, size)
            _unlink(p)
            self._saved.pop(p.name, None)
            total -= size

    # -- reading ------------------------------------------------------------------------------

    def peek(self, model_id: str, key: str, signature: dict, n_ctx: int) -> list[int] | None:
        """The tokens of a saved state that matches, from its header alone (cheap); None if
        there is none or it does not match (logged)."""
        got = self._open(model_id, key, signature, n_ctx, whole=False)
        return got[0] if got else None

    def load(self, model_id: str, key: str, signature: dict, n_ctx: int) -> tuple[list[int], np.ndarray] | None:
        """(tokens, image) of a saved state whose every check passes, else None (logged)."""
        got = self._open(model_id, key, signature, n_ctx, whole=True)
        if got is None:
            return None
        tokens, image = got
        if image is None:  # never: whole=True reads the image
            return None
        try:
            os.utime(self.path_for(model_id, key))  # recently used
        except OSError:
            pass
        return tokens, image

    def _open(
        self, model_id: str, key: str, signature: dict, n_ctx: int, whole: bool
    ) -> tuple[list[int], np.ndarray | None] | None:
        path = self.path_for(model_id, key)
        try:
            return _read(path, model_id, signature, n_ctx, whole)
        except FileNotFoundError:
            return None
        except _Mismatch as e:
            log.info("KV state %s ignored: %s", path.name, e)
        except (OSError, ValueError) as e:
            log.warning("KV state %s ignored: %s", path.name, e)
        return None

    def remove(self, model_id: str, key: str) -> None:
        _unlink(self.path_for(model_id, key))


class _Mismatch(Exception):
    """A saved state that is fine but not for this model / engine / settings."""


def _unlink(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass


def _read(path: Path, model_id: str, signature: dict, n_ctx: int, whole: bool) -> tuple[list[int], np.ndarray | None]:
    """(tokens, the cache image: None unless `whole`) of a saved state that passes every check."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file")
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        size = st.st_size
        pre = f.read(_PRE.size)
        if len(pre) < _PRE.size:
            raise ValueError(f"truncated ({size} bytes)")
        magic, version, hlen = _PRE.unpack(pre)
        if magic != MAGIC:
            raise ValueError("not a saved KV state")
        if version != FORMAT_VERSION:
            raise _Mismatch(f"format version {version}, this engine reads {FORMAT_VERSION}")
        if hlen > MAX_HEADER or _PRE.size + hlen > size:
            raise ValueError(f"header of {hlen} bytes in a file of {size}")
        raw = f.read(hlen)
        try:
            header = json.loads(raw.decode("utf-8"))
            n = int(header["n_tokens"])
            image_bytes = int(header["image_bytes"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise ValueError(f"unreadable header ({e.__class__.__name__})") from None
        if header.get("engine") != engine_version():
            raise _Mismatch(f"made by engine {header.get('engine')!r}, this is {engine_version()!r}")
        if header.get("model") != model_id:
            raise _Mismatch("made with another model file")
        if header.get("signature") != signature:
            raise _Mismatch(f"cache settings {header.get('signature')} differ from {signature}")
        if not 1 <= n <= n_ctx:
            raise _Mismatch(f"{n} tokens do not fit the context of {n_ctx}")
        if image_bytes < 0 or _PRE.size + hlen + 4 * n + image_bytes + _DIGEST != size:
            raise ValueError(
                f"truncated or padded: {size} bytes, the header says {_PRE.size + hlen + 4 * n + image_bytes + _DIGEST}"
            )
        tok_raw = f.read(4 * n)
        tokens = np.frombuffer(tok_raw, dtype="<i4")
        if tokens.size != n:
            raise ValueError("truncated in the token ids")
        if not whole:
            return tokens.astype(np.int64).tolist(), None
        image = np.empty(image_bytes, np.uint8)
        if f.readinto(memoryview(image)) != image_bytes:  # type: ignore[arg-type]  # numpy: __buffer__ 3.12+
            raise ValueError("truncated in the cache image")
        digest = f.read(_DIGEST)
    h = hashlib.sha256(pre)
    h.update(raw)
    h.update(tok_raw)
    h.update(memoryview(image))  # type: ignore[arg-type]  # numpy: __buffer__ only for 3.12+
    if digest != h.digest():
        raise ValueError("checksum mismatch (the file is damaged)")
    return tokens.astype(np.int64).tolist(), image
