"""Garbage collection on the UI thread only, while a window is open.

Python's cyclic collector runs in whichever thread happens to allocate when a threshold is
crossed; if that is the worker thread, it may free a Qt object's wrapper (and with it a widget or
timer) away from the thread that owns it, which crashes. While a window is open, automatic
collection is off and a timer on the UI thread collects by the same thresholds instead.

A full collection walks every tracked object while holding the GIL, and the generation loop in
the worker thread waits for it: with a loaded model's tokenizer in the heap that stalled
generation by several percent. So what exists when the window opens and when a model has loaded
is frozen (`gc.freeze`: long-lived, never walked again); collections see only newer objects. The
price is that a reference cycle already garbage at a freeze is not reclaimed: bytes, once per load.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

COLLECT_EVERY_MS = 250

_users = 0
_timer: QTimer | None = None
_was_enabled = True


def _collect() -> None:
    c0, c1, c2 = gc.get_count()
    t0, t1, t2 = gc.get_threshold()
    if c0 > t0:
        gc.collect(2 if c2 > t2 else 1 if c1 > t1 else 0)


def freeze_survivors() -> None:
    """Everything alive now is long-lived (the window, a loaded model): keep collections off it."""
    gc.freeze()


def acquire(owner: QObject) -> None:
    """A window opens: collect on the UI thread from now on."""
    global _users, _timer, _was_enabled
    _users += 1
    freeze_survivors()
    if _users == 1:
        _was_enabled = gc.isenabled()
        gc.disable()
        _timer = QTimer()
        _timer.setInterval(COLLECT_EVERY_MS)
        _timer.timeout.connect(_collect)
        _timer.start()


def release() -> None:
    """A window closed: the last one gives automatic collection back (after collecting here)."""
    global _users, _timer
    if _users == 0:
        return
    _users -= 1
    if _users == 0:
        if _timer is not None:
            _timer.stop()
            _timer.deleteLater()
            _timer = None
        gc.collect()
        if _was_enabled:
            gc.enable()


__all__ = ["acquire", "release", "freeze_survivors", "COLLECT_EVERY_MS"]
