"""Start the window: `run_window(args)` is what `llambda [FILE.gguf]` calls (args.file optional).

Creates the QApplication, follows the system's light/dark scheme, opens the window, and either
opens args.file (pre-flight, import, load) or loads the model used last time.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import TracebackType
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtGui import QFileOpenEvent
from PySide6.QtWidgets import QApplication

from app.errors import LlambdaError, one_line
from app.ui.crash import install_crash_handler
from app.ui.qt_fix import application
from app.ui.theme import app_icon, follow_system_theme

if TYPE_CHECKING:
    from app.ui.window import MainWindow


def make_app(argv: list[str] | None = None) -> QApplication:
    app = application()
    if app is None:
        app = QApplication(argv if argv is not None else [sys.argv[0]])
    app.setApplicationName("Llambda")
    app.setApplicationDisplayName("Llambda")
    app.setOrganizationName("Llambda")
    app.setDesktopFileName("llambda")
    app.setWindowIcon(app_icon())
    follow_system_theme(app)
    return app


def _close_on_signals(window: MainWindow) -> None:
    """Ctrl+C in the terminal (or SIGTERM) closes the window the normal way: the reply in flight
    is kept, the geometry saved. A timer lets Python run its signal handlers inside Qt's loop."""

    def close(*_: object) -> None:
        window.close()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, close)
        except (ValueError, OSError):  # not the main thread, or not supported here
            pass
    window._signal_timer = QTimer(window)
    window._signal_timer.timeout.connect(lambda: None)
    window._signal_timer.start(250)


class FileOpenForwarder(QObject):
    """macOS hands a double-clicked .gguf to a running app as a FileOpen event, not as an argument:
    forward it to the window like a dropped file."""

    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.FileOpen:
            path = cast(QFileOpenEvent, event).file()
            if path:
                self.window.open_model_file(path)
                return True
        return False


def quiet_excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    """An exception escaping a slot becomes one line on stderr (and the log), never a traceback:
    the window goes on."""
    if logging.getLogger().handlers:  # a log file is set up: the traceback goes there only
        logging.getLogger("app.ui").error("uncaught in the window", exc_info=(kind, value, tb))
    print(f"llambda: internal error: {kind.__name__}: {one_line(str(value))}", file=sys.stderr)


def run_window(args: argparse.Namespace) -> int:
    """Open the window (on `args.file` when given) and run until it closes; returns the exit code."""
    app = make_app()
    sys.excepthook = quiet_excepthook
    from app.ui.window import (
        MainWindow,
    )  # lazy: looked up at each call (tests replace it); make_app alone needs no window

    try:
        window = MainWindow()
    except LlambdaError as e:
        print(f"llambda: error: {e}", file=sys.stderr)
        return 1
    window.crash_handler = install_crash_handler(window)
    window.show()
    _close_on_signals(window)
    window._file_open_forwarder = FileOpenForwarder(window)
    app.installEventFilter(window._file_open_forwarder)
    path = getattr(args, "file", None)
    if path:
        QTimer.singleShot(0, lambda: window.open_model_file(str(path)))
    else:
        QTimer.singleShot(0, window.load_last_used)
    return int(app.exec())


__all__ = ["run_window", "make_app"]
