"""Crash reports for the window: an uncaught Python exception anywhere (a slot on the UI thread, the
worker's thread, a Python thread) is logged with its traceback, saved as a report file in the logs
folder, and shown in a dialog with a one-line reason and the report's path; the window keeps
running. Native crashes are faulthandler's business (app/logs.py).

`install_crash_handler(window)` once per window process (`run_window` does it; tests call it
themselves). With LLAMBDA_TEST_HOOKS=1 the window also gets a hidden action whose slot raises, so
a test can check the whole path on a real slot.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMessageBox

from app.errors import one_line
from app.logs import get, log_path
from app.ui.qt_fix import emit

log = get("ui")

TEST_HOOK_SHORTCUT = "Ctrl+Alt+Shift+F12"


def save_report(exc_type, exc, tb, where: str = "") -> Path | None:
    """Write crash-<time>-<pid>.txt in the logs folder: what failed, the traceback, the versions.
    Returns its path, or None when the folder cannot be written."""
    folder = log_path().parent
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = [
        "Llambda crash report",
        f"time: {time.strftime('%Y-%m-%d %H:%M:%S %z')}",
        f"where: {where or threading.current_thread().name}",
        "",
    ]
    text += traceback.format_exception(exc_type, exc, tb)
    try:
        from app.diagnostics import version_report  # lazy: only a crash report needs it (start-up)

        text += ["", version_report()]
    except Exception as e:  # the report matters more than its appendix
        text += ["", f"(versions unavailable: {type(e).__name__}: {e})"]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"crash-{stamp}-{os.getpid()}.txt"
        n = 1
        while path.exists():
            n += 1
            path = folder / f"crash-{stamp}-{os.getpid()}-{n}.txt"
        path.write_text("".join(line if line.endswith("\n") else line + "\n" for line in text), encoding="utf-8")
        return path
    except OSError as e:
        log.error("could not save a crash report in %s: %s", folder, e)
        return None


def reason_of(exc_type, exc) -> str:
    text = str(exc) if exc is not None else ""
    return one_line(f"{exc_type.__name__}: {text}" if text else exc_type.__name__)


class CrashHandler(QObject):
    """Owns sys.excepthook and threading.excepthook while installed. `reports` lists the saved
    files and `dialog` is the last dialog shown (tests look at both)."""

    crashed = Signal(str, str)  # one-line reason, report path ("" when none was saved)
    test_action: QAction  # the hidden raising action, set by install_crash_handler with LLAMBDA_TEST_HOOKS=1

    def __init__(self, window=None):
        super().__init__(window)
        self.window = window
        self.reports: list[Path] = []
        self.reasons: list[str] = []
        self.dialog: QMessageBox | None = None
        self._previous = None
        self._previous_thread = None
        self.crashed.connect(self.on_crashed, Qt.ConnectionType.QueuedConnection)

    def install(self) -> "CrashHandler":
        self._previous, sys.excepthook = sys.excepthook, self.excepthook
        self._previous_thread, threading.excepthook = threading.excepthook, self.thread_excepthook
        return self

    def uninstall(self) -> None:
        if sys.excepthook == self.excepthook:
            sys.excepthook = self._previous or sys.__excepthook__
        if threading.excepthook == self.thread_excepthook:
            threading.excepthook = self._previous_thread or threading.__excepthook__

    def excepthook(self, exc_type, exc, tb, where: str = "") -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            (self._previous or sys.__excepthook__)(exc_type, exc, tb)
            return
        try:
            reason = reason_of(exc_type, exc)
            log.error(
                "uncaught exception: %s", reason, exc_info=(exc_type, exc, tb), extra={"file_only": True}
            )  # the traceback: the log file only
            path = save_report(exc_type, exc, tb, where)
            if path is not None:
                self.reports.append(path)
                log.warning("%s; crash report saved: %s", reason, path)
            self.reasons.append(reason)
            emit(self.crashed, reason, str(path or ""))
        except Exception:  # never let the hook itself raise into Qt
            sys.__excepthook__(exc_type, exc, tb)

    def thread_excepthook(self, args) -> None:
        if args.exc_type is SystemExit:
            return
        self.excepthook(
            args.exc_type, args.exc_value, args.exc_traceback, where=f"thread {getattr(args.thread, 'name', '?')}"
        )

    def on_crashed(self, reason: str, path: str) -> None:
        """The dialog, on the UI thread: one line of reason, where the report is."""
        parent = self.window if self.window is not None and self.window.isVisible() else None
        box = QMessageBox(parent)
        box.setIcon(QMessageBox.Icon.Critical)
        box.setWindowTitle("Something went wrong")
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setText(
            f"Something went wrong inside Llambda: {reason}\n\nLlambda keeps running; "
            "if something looks wrong, restart it."
        )
        box.setInformativeText(
            f"A report was saved to {path}" if path else "No report could be saved (the logs folder cannot be written)."
        )
        box.setAccessibleName("Something went wrong")
        box.setStandardButtons(QMessageBox.StandardButton.Ok)
        if self.dialog is not None:
            self.dialog.close()
        self.dialog = box
        box.open()


def raise_test_exception() -> None:
    """The test hook's slot: an uncaught exception on a real window slot."""
    raise RuntimeError("deliberate test exception (LLAMBDA_TEST_HOOKS)")


def install_crash_handler(window=None) -> CrashHandler:
    """Install the hooks; with LLAMBDA_TEST_HOOKS=1 add the hidden raising action to `window`."""
    handler = CrashHandler(window).install()
    if window is not None and os.environ.get("LLAMBDA_TEST_HOOKS") == "1":
        a = QAction("Raise a test exception", window)
        a.setObjectName("testRaiseAction")
        a.setShortcut(QKeySequence(TEST_HOOK_SHORTCUT))
        a.triggered.connect(raise_test_exception)
        window.addAction(a)
        handler.test_action = a
    return handler


__all__ = ["CrashHandler", "install_crash_handler", "save_report", "reason_of"]
