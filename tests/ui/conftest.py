"""Fixtures for the window tests: a real MainWindow (offscreen), a synthesised drop, an
event-loop stall probe."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QMimeData, QObject, QPointF, Qt, QTimer, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from tests.ui.fake_engine import FakeEngine


@pytest.fixture
def fake_engine():
    return FakeEngine()


@pytest.fixture
def make_window(qtbot):
    from app.ui.window import MainWindow

    made = []

    def make(engine_factory=None, **kw):
        w = MainWindow(engine_factory=engine_factory, **kw)
        qtbot.addWidget(w)
        w.show()
        qtbot.waitExposed(w)
        w.activateWindow()  # shortcuts go to the active window
        qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()
    # Free the windows here, on the UI thread, before another test's worker thread could collect
    # them (a Qt object freed from the wrong thread crashes).
    import gc

    made.clear()
    gc.collect()


class _OnUiThread(QObject):
    def __init__(self, fn, parent) -> None:
        super().__init__(parent)
        self.fn = fn

    def call(self, *args) -> None:
        self.fn(*args)


def on_ui_thread(signal, fn, window) -> None:
    """Call `fn(*args)` for each emission of one of the worker's signals, on the UI thread and
    after the window's own slots for that emission. A lambda connected to a signal from another
    thread runs on the thread that emits (PySide6), so it would look at the window before the
    window has seen the event."""
    signal.connect(_OnUiThread(fn, window).call)


def track_phases(window, probe) -> None:
    """Name the probe's phases after the worker's signals."""
    w = window.worker
    w.preflight_done.connect(lambda *_: setattr(probe, "phase", "import"))
    w.load_started.connect(lambda *_: setattr(probe, "phase", "load"))
    w.model_loaded.connect(lambda *_: setattr(probe, "phase", "ready"))
    w.load_failed.connect(lambda *_: setattr(probe, "phase", "ready"))
    w.generation_started.connect(lambda *_: setattr(probe, "phase", "generate"))
    w.generation_finished.connect(lambda *_: setattr(probe, "phase", "ready"))


def drop_file(target, path: str, seen: dict | None = None) -> bool:
    """Synthesise a drag-enter then a drop of `path` on `target` (any widget of the window).
    `seen["overlay"]` tells whether the window showed its drop hint between the two."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    pos = target.rect().center()
    enter = QDragEnterEvent(pos, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(target, enter)
    if not enter.isAccepted():
        return False
    if seen is not None:
        seen["overlay"] = target.window().drop_overlay.isVisible()
    drop = QDropEvent(QPointF(pos), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(target, drop)
    return drop.isAccepted()


class StallProbe:
    """A 5 ms QTimer on the UI thread; the longest gap between ticks is the worst stall.

    A separate process ticks alongside (MachineProbe): a UI gap during which that process was
    not scheduled either is the shared machine, not the window, and is excused."""

    def __init__(self, interval_ms: int = 5):
        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self.last = None
        self.gaps: list[float] = []
        self.spans: list[tuple[float, float, str]] = []
        self.small: dict[str, float] = {}
        self.machine = None
        self.phase = ""  # set by the test: "import", "load", "generate"...

    def _tick(self):
        now = time.perf_counter()
        if self.last is not None:
            gap = now - self.last
            self.gaps.append(gap)
            if gap > 0.02:
                self.spans.append((self.last, now, self.phase))
            else:
                self.small[self.phase] = max(self.small.get(self.phase, 0.0), gap)
        self.last = now

    def start(self):
        self.last = None
        if self.machine is None:
            self.machine = MachineProbe()
        self.timer.start()

    def stop(self):
        self.timer.stop()
        if self.machine is not None:
            self.machine.stop()

    def close(self):
        self.stop()
        self.timer.deleteLater()  # deleted on the UI thread; a later GC frees only the wrapper

    @property
    def worst_ms(self) -> float:
        return 1000 * max(self.gaps, default=0.0)

    def unexcused_ms(self, phases=None) -> float:
        """The worst UI gap (in `phases`, default all) that the machine probe did not see a
        comparable gap in."""
        machine = self.machine.spans if self.machine is not None else []
        worst = max((g for ph, g in self.small.items() if phases is None or ph in phases), default=0.0)
        for a, b, ph in self.spans:
            if phases is not None and ph not in phases:
                continue
            seen = max((min(b, d) - max(a, c) for c, d in machine), default=0.0)
            if seen < 0.5 * (b - a):
                worst = max(worst, b - a)
        return 1000 * worst


class MachineProbe:
    """A separate process that sleeps 5 ms in a loop and reports the gaps (CLOCK_MONOTONIC, the
    same clock as time.perf_counter in this process) where it was not scheduled."""

    SCRIPT = (
        "import time, sys\n"
        "last = time.perf_counter()\n"
        "while True:\n"
        "    time.sleep(0.005)\n"
        "    now = time.perf_counter()\n"
        "    if now - last > 0.02: print(last, now, flush=True)\n"
        "    last = now\n"
    )

    def __init__(self):
        import subprocess
        import sys

        self.proc = subprocess.Popen([sys.executable, "-c", self.SCRIPT], stdout=subprocess.PIPE, text=True)
        self.spans: list[tuple[float, float]] = []

    def stop(self):
        if self.proc is None:
            return
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        self.proc = None
        for line in out.splitlines():
            a, b = line.split()
            self.spans.append((float(a), float(b)))


def least_stall(run, attempts: int = 3, phases=None) -> float:
    """The worst gap (ms) of `run(probe)` not explained by the machine (see StallProbe), retried
    while it is 50 ms or more: the machine is shared by several test suites; work done on the UI
    thread, or a worker holding the GIL, fails every attempt."""
    best = float("inf")
    for _ in range(attempts):
        probe = StallProbe()
        run(probe)
        probe.close()
        assert len(probe.gaps) > 50, "the probe hardly ticked"
        best = min(best, probe.unexcused_ms(phases))
        if best < 50:
            break
    return best


@pytest.fixture
def stall_probe():
    p = StallProbe()
    yield p
    p.close()
