"""The stage log: Python's `logging`, set up once per process by `setup()` (the CLI's `main`, the
window's `run_window`, later the server).

- a rotating file `llambda.log` in the logs folder (app/paths.py: `log_dir()`), 1 MiB, 3 old
  files kept; INFO and up (DEBUG with `LLAMBDA_LOG=debug` or `-vv`);
- stderr: warnings and errors only for the command line, INFO with `-v`, DEBUG with `-vv`
  (`LLAMBDA_LOG=debug|info|warning|error` sets both);
- `faulthandler` on `faulthandler-<pid>.log` in the same folder, removed at a clean exit, so a
  file left there (non-empty) is the report of a native crash.

Conversation text is never logged unless the user turns "log prompts" on (`set_log_prompts`,
or `LLAMBDA_LOG_PROMPTS=1`); when on, it goes through the logger "llambda.text" only, whose lines
`diagnostics` removes before anything leaves the machine. The C library logs nothing: it
returns figures and Python logs them. Setting up never fails: a folder that cannot be written
means no file log, one warning on stderr, and `problem()`'s line, which the window shows.
"""

from __future__ import annotations

import atexit
import faulthandler
import logging
import logging.handlers
import os
import sys
from pathlib import Path
from typing import TextIO

from app.paths import log_dir, write_problem

LOG_FILE = "llambda.log"
MAX_BYTES = 1 << 20
BACKUP_COUNT = 3
FAULT_PREFIX = "faulthandler-"
ROOT = "llambda"  # every logger of the app is "llambda.<part>" ...
ROOTS = (ROOT, "app")  # ... or a module's own (`logging.getLogger(__name__)`)
TEXT_LOGGER = "llambda.text"  # conversation text, only when log prompts is on
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

_state: dict = {
    "done": False,
    "file": None,
    "stderr": None,
    "fault_file": None,
    "fault_path": None,
    "log_prompts": None,
    "problem": None,
}


def get(name: str) -> logging.Logger:
    """The app's logger for one part: `get("engine")` -> "llambda.engine"."""
    return logging.getLogger(f"{ROOT}.{name}" if name and not name.startswith(ROOT) else (name or ROOT))


class _NotFileOnly(logging.Filter):
    """stderr skips records logged with extra={"file_only": True} (already said in one line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, "file_only", False)


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (tests and the window swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:  # StreamHandler's attribute, a property here
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


class _File(logging.handlers.RotatingFileHandler):
    """The log file. A line that cannot be written (a full disk) is dropped: one warning on
    stderr when that starts, none per line and no traceback, and a line again when it writes."""

    failing = False

    def handle(self, record: logging.LogRecord) -> bool:
        self._failed_now = False
        out = super().handle(record)
        if self.failing and not self._failed_now:
            self.failing = False
            _to_stderr(logging.WARNING, "the log file %s is written again", self.baseFilename)
        return out

    def handleError(self, record: logging.LogRecord) -> None:
        self._failed_now = True
        if not self.failing:
            self.failing = True
            e = sys.exc_info()[1]
            _to_stderr(
                logging.WARNING,
                "log lines dropped: the log file %s cannot be written (%s)",
                self.baseFilename,
                getattr(e, "strerror", None) or e,
            )

    _failed_now = False


def _to_stderr(level: int, msg: str, *args: object) -> None:
    """One record for the stderr handler only (the file is what failed)."""
    err = _state["stderr"]
    if err is not None:
        err.handle(logging.LogRecord(f"{ROOT}.logs", level, __file__, 0, msg, args, None))


def env_level() -> int | None:
    value = os.environ.get("LLAMBDA_LOG", "").strip().lower()
    return LEVELS.get(value)


def log_path() -> Path:
    return log_dir() / LOG_FILE


def setup(kind: str = "cli", verbose: int = 0, *, force: bool = False) -> Path | None:
    """Configure logging for this process (once; again only with `force`, as tests do after
    moving LLAMBDA_HOME). `kind`: "cli" (stderr shows warnings), "window" or "server".
    Returns the log file's path, or None when the logs folder cannot be written."""
    if _state["done"] and not force:
        set_verbosity(verbose, kind)
        return _state["file"].baseFilename if _state["file"] is not None else None
    shutdown()
    roots = [logging.getLogger(name) for name in ROOTS]
    for r in roots:
        r.setLevel(logging.DEBUG)
    root = roots[0]
    level = env_level()
    fmt = logging.Formatter(FORMAT, DATE_FORMAT)

    err = _Stderr()
    err.setFormatter(logging.Formatter("llambda: %(levelname)s: %(message)s"))
    err.addFilter(_NotFileOnly())
    for r in roots:
        r.addHandler(err)
    _state["stderr"] = err
    set_verbosity(verbose, kind)

    path = None
    try:
        path = log_path()
        why = write_problem(path.parent)  # creates it; a log file there may still be writable,
        if why is not None:  # but rotating it (renames) would fail at every line
            raise OSError(why)
        fh = _File(path, maxBytes=MAX_BYTES, backupCount=BACKUP_COUNT, encoding="utf-8", delay=False)
        fh.setFormatter(fmt)
        fh.setLevel(logging.DEBUG if (level == logging.DEBUG or verbose >= 2) else logging.INFO)
        for r in roots:
            r.addHandler(fh)
        _state["file"] = fh
    except OSError as e:
        folder = path.parent if path is not None else "(unknown)"
        path = None
        root.warning("no log file: the logs folder cannot be written (%s)", e)
        _state["problem"] = (
            f"No log file and no crash reports: the logs folder {folder} cannot be written ({e.strerror or e})."
        )
    if path is not None:
        _enable_faulthandler(path.parent)
    _state["done"] = True
    get("app").info(
        "start: %s pid %d, python %s, %s",
        kind,
        os.getpid(),
        sys.version.split()[0],
        sys.platform,
        extra={"file_only": True},
    )
    return path


def problem() -> str | None:
    """One line for the user when `setup` could not open the log file (the window shows it at
    start-up), else None."""
    return _state["problem"]


def set_verbosity(verbose: int, kind: str = "cli") -> None:
    """stderr's level: warnings (and errors) by default, INFO with -v, DEBUG with -vv."""
    err = _state["stderr"]
    if err is None:
        return
    level = env_level()
    if verbose >= 2:
        level = logging.DEBUG
    elif verbose == 1:
        level = min(level or logging.INFO, logging.INFO)
    err.setLevel(level if level is not None else logging.WARNING)


def _enable_faulthandler(folder: Path) -> None:
    """Native crashes (a segfault in a kernel, an abort) write Python's stacks to a file named
    after this process; a clean exit removes it. Leftover empty files are swept."""
    for old in folder.glob(f"{FAULT_PREFIX}*.log"):
        try:
            if old.stat().st_size == 0 and not _alive(old):
                old.unlink()
        except OSError:
            pass
    p = folder / f"{FAULT_PREFIX}{os.getpid()}.log"
    try:
        f = open(p, "w", encoding="utf-8")
    except OSError:
        return
    _state["fault_before"] = faulthandler.is_enabled()
    faulthandler.enable(file=f, all_threads=True)
    _state["fault_file"], _state["fault_path"] = f, p
    atexit.register(_close_faulthandler)


def _alive(fault_file: Path) -> bool:
    """Is the process that owns this faulthandler file still running? (Its file must stay.)"""
    try:
        pid = int(fault_file.stem[len(FAULT_PREFIX) :])
    except ValueError:
        return False
    try:
        import psutil  # lazy: slow to import; only an empty old fault file needs it

        return psutil.pid_exists(pid)
    except ImportError:
        return True


def _close_faulthandler() -> None:
    f, p = _state["fault_file"], _state["fault_path"]
    _state["fault_file"] = _state["fault_path"] = None
    if f is None:
        return
    try:
        faulthandler.disable()
        if _state.get("fault_before") and sys.__stderr__ is not None:
            faulthandler.enable(file=sys.__stderr__, all_threads=True)  # as it was (pytest's)
    except Exception:  # interpreter shutting down
        pass
    try:
        f.close()
        if p.stat().st_size == 0:
            p.unlink()
    except OSError:
        pass


def native_crash_reports(folder: Path | None = None) -> list[Path]:
    """Files of earlier native crashes (non-empty faulthandler files of other processes)."""
    if folder is None:
        folder = log_path().parent
    own = _state["fault_path"]
    out = []
    for p in sorted(folder.glob(f"{FAULT_PREFIX}*.log")):
        try:
            if p != own and p.stat().st_size > 0:
                out.append(p)
        except OSError:
            pass
    return out


def shutdown() -> None:
    """Remove the handlers set up here (tests; a second `setup(force=True)`)."""
    roots = [logging.getLogger(name) for name in ROOTS]
    for key in ("file", "stderr"):
        h = _state[key]
        if h is not None:
            for r in roots:
                r.removeHandler(h)
            h.close()
            _state[key] = None
    if _state["done"]:
        for r in roots:
            r.setLevel(logging.NOTSET)
    _close_faulthandler()
    _state["done"] = False
    _state["problem"] = None


# -- conversation text --------------------------------------------------------------------------


def set_log_prompts(on: bool | None) -> None:
    """Turn logging of conversation text on or off (None: back to LLAMBDA_LOG_PROMPTS)."""
    _state["log_prompts"] = on


def log_prompts() -> bool:
    on = _state["log_prompts"]
    if on is None:
        return os.environ.get("LLAMBDA_LOG_PROMPTS", "").strip().lower() in ("1", "yes", "true", "on")
    return bool(on)


def log_text(what: str, text: str) -> None:
    """Log a piece of conversation text (prompt or reply) on "llambda.text", only when the user
    asked for it; otherwise nothing at all."""
    if log_prompts():
        logging.getLogger(TEXT_LOGGER).info("%s: %r", what, text)


__all__ = [
    "setup",
    "shutdown",
    "get",
    "problem",
    "set_verbosity",
    "log_path",
    "native_crash_reports",
    "set_log_prompts",
    "log_prompts",
    "log_text",
    "LOG_FILE",
    "TEXT_LOGGER",
    "ROOT",
]
