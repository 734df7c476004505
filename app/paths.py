"""Where Llambda keeps things on disk, and how files there are replaced safely.

Folders come from platformdirs: models in the user *cache* folder (a cache may be wiped; models
can be imported again), conversations and settings in the user *data* folder, logs in the user
*log* folder. Environment variables move them, so tests never touch the real user folders:

| variable            | moves                                   |
| ------------------- | --------------------------------------- |
| `LLAMBDA_HOME`      | all of them: HOME/cache, HOME/data, HOME/logs |
| `LLAMBDA_CACHE_DIR` | the cache folder (models go in its `models/`) |
| `LLAMBDA_MODELS_DIR`| the model library itself                |
| `LLAMBDA_DATA_DIR`  | conversations and settings              |
| `LLAMBDA_LOG_DIR`   | logs                                    |

The finer variables win over `LLAMBDA_HOME`. Nothing here creates a folder until asked
(`ensure_dir`, `write_problem`). `atomic_write_bytes`/`atomic_write_text` write a temporary file in the same
folder, fsync it, rename it over the target and fsync the folder: a reader sees the old file or
the new one, never half of one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

APP_NAME = "llambda"

CHATS_DB_NAME = "chats.sqlite3"


def _env_dir(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser().absolute() if value else None


def home_dir() -> Path | None:
    """The folder `LLAMBDA_HOME` names, or None when it is not set."""
    return _env_dir("LLAMBDA_HOME")


def cache_dir() -> Path:
    """The user cache folder (wipeable): `user_cache_dir("llambda")` unless moved."""
    d = _env_dir("LLAMBDA_CACHE_DIR")
    if d is not None:
        return d
    home = home_dir()
    if home is not None:
        return home / "cache"
    import platformdirs  # lazy: ~15 ms, and not needed when a LLAMBDA_* variable names the folder

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def models_dir() -> Path:
    """The model library: imported copies and hard links named by hash, plus the index."""
    d = _env_dir("LLAMBDA_MODELS_DIR")
    return d if d is not None else cache_dir() / "models"


def data_dir() -> Path:
    """The user data folder (never wiped): conversations and settings."""
    d = _env_dir("LLAMBDA_DATA_DIR")
    if d is not None:
        return d
    home = home_dir()
    if home is not None:
        return home / "data"
    import platformdirs  # lazy: ~15 ms, and not needed when a LLAMBDA_* variable names the folder

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def log_dir() -> Path:
    """The user log folder."""
    d = _env_dir("LLAMBDA_LOG_DIR")
    if d is not None:
        return d
    home = home_dir()
    if home is not None:
        return home / "logs"
    import platformdirs  # lazy: ~15 ms, and not needed when a LLAMBDA_* variable names the folder

    return Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))


def chats_db_path() -> Path:
    """The SQLite file of conversations (in the data folder, never the cache)."""
    return data_dir() / CHATS_DB_NAME


def ensure_dir(path: str | os.PathLike) -> Path:
    """Create a folder (and its parents) if needed; return it as a Path."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    return p


def write_problem(folder: str | os.PathLike) -> str | None:
    """Why Llambda cannot keep files in `folder`, in a few words, or None when it can.

    Tried for real, not guessed from permission bits (root ignores those; a read-only mount or
    an immutable folder refuses root too): the folder is created if missing, and a probe file is
    written in it and removed.
    """
    try:
        p = ensure_dir(folder)
        fd, probe = tempfile.mkstemp(prefix=".llambda-probe-", dir=p)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return e.strerror or str(e)
    return None


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a rename inside `path` durable. A no-op where folders cannot be opened (Windows)."""
    if os.name == "nt":
        return
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, mode: int = 0o644) -> Path:
    """Replace `path` with `data` atomically (temporary file, fsync, rename, fsync folder)."""
    target = Path(path)
    folder = ensure_dir(target.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.chmod(tmp, mode)
        except OSError:
            pass
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(folder)
    return target


def atomic_write_text(path: str | os.PathLike, text: str, mode: int = 0o644) -> Path:
    """`atomic_write_bytes` for UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"), mode)


__all__ = [
    "APP_NAME",
    "home_dir",
    "cache_dir",
    "models_dir",
    "data_dir",
    "log_dir",
    "chats_db_path",
    "ensure_dir",
    "write_problem",
    "fsync_dir",
    "atomic_write_bytes",
    "atomic_write_text",
]
