"""The library index: one JSON file listing every model, replaced atomically on each change.

An entry says what a model is (name, architecture, parameters, quantization), where its bytes
are (`storage`: "copy" or "link" under the library folder named `<sha256>.gguf`, or
"reference" to a file left where it was) and what the file looked like when it was checked
(size, mtime), so a file changed behind our back is refused before it is mapped.
A damaged index is kept aside (`index.json.damaged-<time>`) and rebuilt from the files.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from app.errors import LibraryError
from app.paths import atomic_write_text

INDEX_NAME = "index.json"
INDEX_VERSION = 1
STORAGE_KINDS = ("copy", "link", "reference")


@dataclass(frozen=True)
class ModelEntry:
    """One model of the library. Times are seconds since the epoch (UTC)."""

    name: str
    sha256: str
    architecture: str
    n_params: int
    quantization: str
    size: int
    added: float
    storage: str  # "copy" | "link" | "reference"
    path: str  # file name in the library folder, or an absolute path (reference)
    mtime_ns: int  # of the file when last verified
    last_used: float | None = None
    source: str = ""  # where it was imported from

    def __post_init__(self) -> None:
        if self.storage not in STORAGE_KINDS:
            raise ValueError(f"unknown storage kind {self.storage!r}")
        if len(self.sha256) != 64:
            raise ValueError(f"sha256 must be 64 hex digits, got {self.sha256!r}")

    def file_path(self, library_dir: Path) -> Path:
        """Where this model's bytes are."""
        return Path(self.path) if self.storage == "reference" else library_dir / self.path

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "ModelEntry":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def with_(self, **changes: Any) -> "ModelEntry":
        return replace(self, **changes)


def load_index(folder: Path) -> tuple[list[ModelEntry], bool]:
    """(entries, ok). `ok` is False when the file was unreadable (it has been moved aside)."""
    path = folder / INDEX_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], True
    except OSError as e:
        raise LibraryError(f"{path}: cannot read the model index: {e.strerror or e}") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("models"), list):
            raise ValueError("no model list")
        entries = []
        for item in doc["models"]:
            try:
                entries.append(ModelEntry.from_json(item))
            except (TypeError, ValueError):
                continue  # one bad entry: drop it, keep the others (the file is re-adopted)
        return entries, True
    except (UnicodeDecodeError, ValueError):
        aside = folder / f"{INDEX_NAME}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            os.replace(path, aside)
        except OSError:
            pass
        return [], False


def save_index(folder: Path, entries: list[ModelEntry]) -> None:
    doc = {"version": INDEX_VERSION, "models": [e.to_json() for e in entries]}
    try:
        atomic_write_text(folder / INDEX_NAME, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    except OSError as e:
        err = LibraryError(
            f"{folder / INDEX_NAME}: cannot write the model index: {e.strerror or e}; it was left as it was"
        )
        err.errno = e.errno  # ENOSPC: the caller says "disk full"
        raise err from None


class IndexLock:
    """An exclusive lock on the library folder between processes (flock; a no-op elsewhere)."""

    def __init__(self, folder: Path):
        self.path = folder / ".lock"
        self._fd: int | None = None

    def __enter__(self) -> "IndexLock":
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl  # lazy: POSIX only (ImportError on Windows)
        except ImportError:  # Windows: single-writer by convention
            return self
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the flock
            self._fd = None


__all__ = ["ModelEntry", "load_index", "save_index", "IndexLock", "INDEX_NAME", "STORAGE_KINDS"]
