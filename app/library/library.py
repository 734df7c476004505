"""The model library: import GGUF files into the user cache folder, list, resolve and remove them.

Import reads the header with the strict reader before anything is copied, checks free disk
space, copies to `.import-<pid>-<random>.part` while hashing (SHA-256), fsyncs, verifies the
copy (size, hash, header), and only then renames it to `<sha256>.gguf` and records it in the
index. Any failure (disk full, read error, cancel, a damaged file) leaves no partial file.
The same bytes imported twice are kept once. `keep_in_place` hard-links the file when it is on
the same filesystem, otherwise records a reference checked for size and mtime before each load.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import os
import re
import secrets
import shutil
import stat as stat_mod
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from app.errors import LibraryError, ModelFormatError
from app.gguf import FILE_TYPES, open_gguf
from app.library.index import IndexLock, ModelEntry, load_index, save_index
from app.paths import ensure_dir, fsync_dir, models_dir

CHUNK_BYTES = 4 << 20
FREE_MARGIN_BYTES = 64 << 20  # never fill the disk to the last byte
PART_PREFIX = ".import-"
PART_SUFFIX = ".part"
_HASH_NAME = re.compile(r"^[0-9a-f]{64}\.gguf$")

Progress = Callable[[int, int], None]  # (bytes done, bytes total)
Cancel = threading.Event | Callable[[], bool]  # set, or returning True: stop


class ImportCancelled(LibraryError):
    """The import was cancelled; nothing was kept."""


class DuplicateModelError(LibraryError):
    """The same bytes are already in the library (`entry` says under which name)."""

    def __init__(self, message: str, entry: ModelEntry):
        super().__init__(message)
        self.entry = entry


@dataclass(frozen=True)
class ModelInfo:
    """What the header says about a model file."""

    name: str
    architecture: str
    n_params: int
    quantization: str


def describe_model(path: str | os.PathLike) -> ModelInfo:
    """Read a GGUF header with the strict reader. Raises ModelFormatError for a bad file.

    `name` is general.name, or the file name without `.gguf` when the file has none."""
    with open_gguf(path) as f:
        md = f.metadata
        arch = md.get("general.architecture")
        name = md.get("general.name")
        file_type = md.get("general.file_type")
        quant = FILE_TYPES.get(file_type) if isinstance(file_type, int) else None
        if quant is None:
            by_bytes: Counter[str] = Counter()
            for t in f.tensors.values():
                if len(t.shape) >= 2:
                    by_bytes[t.type.name] += t.n_bytes
            quant = by_bytes.most_common(1)[0][0] if by_bytes else "unknown"
        stem = Path(os.fspath(path)).name
        stem = stem[:-5] if stem.lower().endswith(".gguf") else stem
        return ModelInfo(
            name=name.strip() if isinstance(name, str) and name.strip() else stem,
            architecture=arch if isinstance(arch, str) and arch else "unknown",
            n_params=int(f.n_params),
            quantization=quant,
        )


def _file_stem(path: Path) -> str:
    """The default name of an imported model: its file name without `.gguf`, which is what the
    person downloaded and usually names the quantization too (general.name often does not)."""
    n = path.name
    return (n[:-5] if n.lower().endswith(".gguf") else n).strip() or n


def _cancelled(cancel: Cancel | None) -> bool:
    if cancel is None:
        return False
    if isinstance(cancel, threading.Event):
        return cancel.is_set()
    return bool(cancel())


def _write_all(fd: int, data: memoryview) -> None:
    """Write every byte (os.write may write fewer). A seam for tests that simulate a full disk."""
    while data:
        n = os.write(fd, data)
        data = data[n:]


class _Meter:
    """Progress over several passes of one import, reported as one monotonic (done, total)."""

    def __init__(self, total: int, progress: Progress | None, cancel: Cancel | None):
        self.total, self.done, self.progress, self.cancel = total, 0, progress, cancel

    def step(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(min(self.done, self.total), self.total)
        if _cancelled(self.cancel):
            raise ImportCancelled("import cancelled; nothing was kept")

    def finish(self) -> None:
        self.done = self.total
        if self.progress is not None:
            self.progress(self.total, self.total)


def _hash_file(path: Path, meter: _Meter) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb", buffering=0) as f:
            while True:
                chunk = f.read(CHUNK_BYTES)
                if not chunk:
                    break
                h.update(chunk)
                meter.step(len(chunk))
    except OSError as e:
        raise LibraryError(f"{path}: read error: {e.strerror or e}") from None
    return h.hexdigest()


def _same_file_state(a: os.stat_result, b: os.stat_result) -> bool:
    return a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns


def _pid_alive(pid: int) -> bool:
    try:
        import psutil  # lazy: slow to import; only a leftover partial import needs it

        return psutil.pid_exists(pid)
    except Exception:
        return True


def _unique_name(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    i = 2
    while f"{base} ({i})" in taken:
        i += 1
    return f"{base} ({i})"


class ModelLibrary:
    """The models in one library folder (default: `app.paths.models_dir()`)."""

    def __init__(self, folder: str | os.PathLike | None = None):
        self.folder = Path(folder) if folder is not None else models_dir()

    # -- index ---------------------------------------------------------------------------------

    def _lock(self) -> IndexLock:
        ensure_dir(self.folder)
        return IndexLock(self.folder)

    def _reconcile(self) -> list[ModelEntry]:
        """Load the index (lock held); adopt verified copies it lacks; drop stale temp files."""
        entries, ok = load_index(self.folder)
        changed = not ok
        known = {e.path for e in entries if e.storage != "reference"}
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return entries
        for fname in names:
            full = self.folder / fname
            if fname.startswith(PART_PREFIX) and fname.endswith(PART_SUFFIX):
                pid = fname[len(PART_PREFIX) :].split("-", 1)[0]
                if not pid.isdigit() or not _pid_alive(int(pid)):
                    try:
                        full.unlink()
                    except OSError:
                        pass
                continue
            if _HASH_NAME.match(fname) and fname not in known:
                # Renamed into place but not yet indexed (process killed between the two steps),
                # or an index rebuilt after damage. The name is its verified hash.
                try:
                    info = describe_model(full)
                    st = full.stat()
                except (ModelFormatError, OSError):
                    continue
                taken = {e.name for e in entries}
                entries.append(
                    ModelEntry(
                        name=_unique_name(info.name, taken),
                        sha256=fname[:64],
                        architecture=info.architecture,
                        n_params=info.n_params,
                        quantization=info.quantization,
                        size=st.st_size,
                        added=time.time(),
                        storage="link" if st.st_nlink > 1 else "copy",
                        path=fname,
                        mtime_ns=st.st_mtime_ns,
                    )
                )
                changed = True
        if changed:
            save_index(self.folder, entries)
        return entries

    def list(self) -> list[ModelEntry]:
        """Every model in the library, oldest first."""
        if not self.folder.exists():
            return []
        with self._lock():
            return sorted(self._reconcile(), key=lambda e: e.added)

    def status(self, entry: ModelEntry) -> str:
        """ "ok", "missing" (the file is gone) or "changed" (size or mtime differs from the index)."""
        try:
            st = entry.file_path(self.folder).stat()
        except OSError:
            return "missing"
        return "ok" if (st.st_size, st.st_mtime_ns) == (entry.size, entry.mtime_ns) else "changed"

    @staticmethod
    def _find(entries: builtins.list[ModelEntry], key: str) -> ModelEntry:
        for e in entries:
            if e.name == key:
                return e
        folded = [e for e in entries if e.name.casefold() == key.casefold()]
        if len(folded) == 1:
            return folded[0]
        k = key.lower()
        if len(k) >= 6 and all(c in "0123456789abcdef" for c in k):
            hits = [e for e in entries if e.sha256.startswith(k)]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                raise LibraryError(f"{key!r} matches {len(hits)} models; give more of the hash")
        raise LibraryError(f"no model named {key!r} in your library")

    def get(self, name_or_hash: str) -> ModelEntry:
        """The entry by exact name, case-insensitive name, or hash (a unique prefix of 6+ digits)."""
        return self._find(self.list(), name_or_hash)

    def resolve(self, name_or_hash: str, mark_used: bool = True) -> Path:
        """The file to load for a model, checked for size and mtime first; records last use."""
        with self._lock():
            entries = self._reconcile()
            e = self._find(entries, name_or_hash)
            path = e.file_path(self.folder)
            state = self.status(e)
            if state == "missing":
                raise LibraryError(f"{e.name}: the model file is gone ({path}); import it again")
            if state == "changed":
                raise LibraryError(
                    f"{e.name}: {path} has changed since it was imported (size or modification "
                    "time differs); import it again"
                )
            if mark_used:
                entries = [x.with_(last_used=time.time()) if x.sha256 == e.sha256 else x for x in entries]
                save_index(self.folder, entries)
            return path

    def mark_used(self, path: str | os.PathLike) -> ModelEntry | None:
        """Record now as the last use of the model whose file is `path` (the window calls this
        when it loads one); None when no entry of the library has that file."""
        target = os.path.abspath(os.fspath(path))
        with self._lock():
            entries = self._reconcile()
            hit = next((e for e in entries if os.path.abspath(e.file_path(self.folder)) == target), None)
            if hit is None:
                return None
            used = hit.with_(last_used=time.time())
            save_index(self.folder, [used if x.sha256 == hit.sha256 else x for x in entries])
            return used

    def verify(self, name_or_hash: str, progress: Progress | None = None, cancel: Cancel | None = None) -> bool:
        """Re-hash a model's file: True when its bytes are still the ones imported."""
        e = self.get(name_or_hash)
        path = e.file_path(self.folder)
        if self.status(e) == "missing":
            return False
        return _hash_file(path, _Meter(max(1, e.size), progress, cancel)) == e.sha256

    def remove(self, name_or_hash: str) -> ModelEntry:
        """Forget a model and delete our copy (a kept-in-place original is never touched)."""
        with self._lock():
            entries = self._reconcile()
            e = self._find(entries, name_or_hash)
            if e.storage != "reference":
                try:
                    (self.folder / e.path).unlink()
                except FileNotFoundError:
                    pass
                except OSError as err:
                    raise LibraryError(
                        f"{e.name}: cannot delete {self.folder / e.path}: {err.strerror or err}"
                    ) from None
            save_index(self.folder, [x for x in entries if x.sha256 != e.sha256])
            return e

    def rename(self, name_or_hash: str, new_name: str) -> ModelEntry:
        new_name = new_name.strip()
        if not new_name:
            raise LibraryError("a model name cannot be empty")
        with self._lock():
            entries = self._reconcile()
            e = self._find(entries, name_or_hash)
            if any(x.name == new_name and x.sha256 != e.sha256 for x in entries):
                raise LibraryError(f"there is already a model named {new_name!r}")
            renamed = e.with_(name=new_name)
            save_index(self.folder, [renamed if x.sha256 == e.sha256 else x for x in entries])
            return renamed

    # -- import --------------------------------------------------------------------------------

    def _duplicate(self, entries: builtins.list[ModelEntry], digest: str, src: Path) -> ModelEntry | None:
        """Raise DuplicateModelError when these bytes are already here and healthy; return the
        entry of a copy that went missing or changed, which the new import replaces."""
        for e in entries:
            if e.sha256 == digest:
                if self.status(e) == "ok":
                    raise DuplicateModelError(f"{src.name} is already in your library as {e.name}", e)
                return e
        return None

    def import_model(
        self,
        path: str | os.PathLike,
        *,
        keep_in_place: bool = False,
        name: str | None = None,
        progress: Progress | None = None,
        cancel: Cancel | None = None,
    ) -> ModelEntry:
        """Add a GGUF file to the library and return its entry.

        Raises ModelFormatError (bad file: nothing added), DuplicateModelError (same bytes
        already there: nothing copied), ImportCancelled, or LibraryError (disk full, read error).
        `progress(done, total)` is called per chunk; `cancel` is a callable or threading.Event.
        """
        src = Path(os.path.abspath(os.fspath(path)))
        info = describe_model(src)  # header check before any copy
        try:
            before = src.stat()
        except OSError as e:
            raise LibraryError(f"{src}: cannot read: {e.strerror or e}") from None
        if not stat_mod.S_ISREG(before.st_mode):
            raise ModelFormatError(f"{src}: not a regular file")
        size = before.st_size
        with self._lock():
            entries = self._reconcile()
        # Hash first (no copy) when the bytes might already be here or will not be copied.
        prehash = keep_in_place or any(e.size == size for e in entries)
        passes = (1 if prehash else 0) + (0 if keep_in_place else 2)
        meter = _Meter(max(1, passes * size), progress, cancel)
        digest = None
        if prehash:
            digest = _hash_file(src, meter)
            self._duplicate(entries, digest, src)
        if keep_in_place:
            assert digest is not None  # keep_in_place implies prehash
            entry = self._keep_in_place(src, before, digest, info, name)
        else:
            entry = self._copy_in(src, before, digest, info, name, meter)
        meter.finish()
        return entry

    def _new_entry(
        self,
        entries: builtins.list[ModelEntry],
        info: ModelInfo,
        name: str | None,
        digest: str,
        size: int,
        storage: str,
        path: str,
        mtime_ns: int,
        src: Path,
        stale: ModelEntry | None = None,
    ) -> ModelEntry:
        if stale is not None and not name:
            name = stale.name
        taken = {e.name for e in entries if e.sha256 != digest}
        return ModelEntry(
            name=_unique_name((name or "").strip() or _file_stem(src), taken),
            sha256=digest,
            architecture=info.architecture,
            n_params=info.n_params,
            quantization=info.quantization,
            size=size,
            added=time.time(),
            storage=storage,
            path=path,
            mtime_ns=mtime_ns,
            source=str(src),
        )

    def _keep_in_place(
        self, src: Path, before: os.stat_result, digest: str, info: ModelInfo, name: str | None
    ) -> ModelEntry:
        final = self.folder / f"{digest}.gguf"
        with self._lock():
            entries = self._reconcile()
            stale = self._duplicate(entries, digest, src)
            after = src.stat()
            if not _same_file_state(before, after):
                raise LibraryError(f"{src}: the file changed while it was being imported")
            if stale is not None and stale.storage != "reference":
                try:
                    final.unlink()
                except OSError:
                    pass
            try:
                os.link(src, final)
                storage, where, st = "link", final.name, final.stat()
            except OSError:
                storage, where, st = "reference", str(src), after
            entry = self._new_entry(entries, info, name, digest, st.st_size, storage, where, st.st_mtime_ns, src, stale)
            self._save_or_undo(entries, entry, final if storage == "link" else None, src)
            return entry

    def _copy_in(
        self, src: Path, before: os.stat_result, digest: str | None, info: ModelInfo, name: str | None, meter: _Meter
    ) -> ModelEntry:
        size = before.st_size
        ensure_dir(self.folder)
        free = shutil.disk_usage(self.folder).free
        if free < size + FREE_MARGIN_BYTES:
            raise LibraryError(
                f"not enough free disk space to import {src.name}: it needs {size:,} bytes "
                f"(+{FREE_MARGIN_BYTES >> 20} MB margin), {free:,} bytes are free in {self.folder}"
            )
        tmp = self.folder / f"{PART_PREFIX}{os.getpid()}-{secrets.token_hex(6)}{PART_SUFFIX}"
        kept = False
        try:
            copied = self._copy_hashing(src, tmp, size, meter)
            if digest is not None and copied != digest:
                raise LibraryError(f"{src}: the file changed while it was being imported")
            if not _same_file_state(before, src.stat()):
                raise LibraryError(f"{src}: the file changed while it was being imported")
            # Verify what is on disk now, not what we meant to write.
            if tmp.stat().st_size != size:
                raise LibraryError(f"{tmp}: copy has {tmp.stat().st_size} bytes, expected {size}")
            if _hash_file(tmp, meter) != copied:
                raise LibraryError(f"{src}: the copy does not match the original (SHA-256 differs)")
            describe_model(tmp)
            final = self.folder / f"{copied}.gguf"
            with self._lock():
                entries = self._reconcile()
                stale = self._duplicate(entries, copied, src)
                os.replace(tmp, final)
                kept = True
                fsync_dir(self.folder)
                entry = self._new_entry(
                    entries, info, name, copied, size, "copy", final.name, final.stat().st_mtime_ns, src, stale
                )
                self._save_or_undo(entries, entry, final, src)
                return entry
        finally:
            if not kept:
                try:
                    tmp.unlink()
                except OSError:
                    pass

    def _save_or_undo(
        self, entries: builtins.list[ModelEntry], entry: ModelEntry, placed: Path | None, src: Path
    ) -> None:
        """Record `entry` in the index (lock held); when the index cannot be written (a full
        disk), remove the file just put in place, so the library is exactly as it was."""
        try:
            save_index(self.folder, [x for x in entries if x.sha256 != entry.sha256] + [entry])
        except LibraryError as e:
            if placed is not None:
                try:
                    placed.unlink()
                except OSError:
                    pass
            if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
                raise LibraryError(
                    f"disk full while importing {src.name} into {self.folder} "
                    "(the model index could not be written); nothing was kept"
                ) from None
            raise LibraryError(f"{src.name} was not imported: {e}; nothing was kept") from None

    def _copy_hashing(self, src: Path, tmp: Path, size: int, meter: _Meter) -> str:
        h = hashlib.sha256()
        done = 0
        try:
            fin = open(src, "rb", buffering=0)
        except OSError as e:
            raise LibraryError(f"{src}: cannot read: {e.strerror or e}") from None
        with fin:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644)
            try:
                while True:
                    try:
                        chunk = fin.read(CHUNK_BYTES)
                    except OSError as e:
                        raise LibraryError(
                            f"{src}: read error after {done:,} bytes: {e.strerror or e}; nothing was kept"
                        ) from None
                    if not chunk:
                        break
                    h.update(chunk)
                    try:
                        _write_all(fd, memoryview(chunk))
                    except OSError as e:
                        if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
                            raise LibraryError(
                                f"disk full while importing {src.name} into {self.folder} "
                                f"({done:,} of {size:,} bytes copied); nothing was kept"
                            ) from None
                        raise LibraryError(f"{tmp}: write error: {e.strerror or e}; nothing was kept") from None
                    done += len(chunk)
                    meter.step(len(chunk))
                try:
                    os.fsync(fd)
                except OSError as e:
                    raise LibraryError(f"{tmp}: cannot flush to disk: {e.strerror or e}; nothing was kept") from None
            finally:
                os.close(fd)
        if done != size:
            raise LibraryError(f"{src}: read {done:,} bytes, expected {size:,} (file changed?)")
        return h.hexdigest()


def default_library() -> ModelLibrary:
    """The library in the user cache folder (or wherever LLAMBDA_* variables put it)."""
    return ModelLibrary()


__all__ = ["ModelLibrary", "ModelInfo", "describe_model", "default_library", "ImportCancelled", "DuplicateModelError"]


def resolve_model(path_or_name: str) -> str:
    """A model argument of the command line: an existing file as it is, else a library name.

    A name that is in neither place is a bad model file (exit code 3), said in one line.
    """
    if os.path.exists(path_or_name):
        return path_or_name
    try:
        return str(default_library().resolve(path_or_name))
    except LibraryError as e:
        raise ModelFormatError(f"{path_or_name}: no such file, and {e}") from None
