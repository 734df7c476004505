"""The bounded load test under the window: the window serves its loaded model (the serve bar's
switch) while a separate program sends 8 concurrent clients' requests (streamed, plain, left
mid-stream, garbage) and the window itself replies to a message in the middle of it. Every
well-formed request is answered, the window's reply completes, nothing crashes, the process's
memory comes back to its baseline (within 5%), and the UI thread's heartbeat (StallProbe, a 5 ms
QTimer) never stops for long. The default run sends 8 x 4 requests; the slow one 8 x 20."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest
from PySide6.QtCore import Qt

from tests.server.test_load import settled_rss
from tests.ui.conftest import StallProbe, drop_file

FAST = {"temperature": 0.0, "max_tokens": 16, "seed": 1}
# The worst gap of the UI thread's 5 ms timer that the machine does not explain (OwnStallProbe).
# The window's own budget is 50 ms (tests/ui); under a server load the uvicorn thread and the
# engine worker take the interpreter lock in turns with the UI thread, so this allows twice that.
STALL_BOUND_MS = 100
ATTEMPTS = 3  # load rounds at most, while the worst gap is over the bound (a shared machine)


def runqueue_s() -> float | None:
    """Seconds the calling thread has spent runnable but waiting for a CPU (Linux schedstat)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class OwnStallProbe(StallProbe):
    """StallProbe whose gaps leave out the time the UI thread was runnable but had no CPU (its
    run-queue time): on a machine shared with other jobs that is their doing, not the window's.
    What is left is time the thread ran (work on the UI thread) or slept (waiting for the
    interpreter lock, a lock, the disk). Gaps the machine probe saw are excused as before."""

    def start(self):
        self._rq = None
        super().start()

    def _tick(self):
        rq = runqueue_s()
        if self.last is not None and self._rq is not None and rq is not None:
            self.last = min(time.perf_counter(), self.last + (rq - self._rq))
        self._rq = rq
        super()._tick()


def start_load(url: str, clients: int, per_client: int) -> subprocess.Popen:
    """The clients in their own process (as other programs are): their threads do not compete
    with the window's for its interpreter lock."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.server.loadgen", url, str(clients), str(per_client)],
        stdout=subprocess.PIPE,
        text=True,
    )


def finish_load(qtbot, proc: subprocess.Popen, timeout_ms: int) -> list:
    qtbot.waitUntil(lambda: proc.poll() is not None, timeout=timeout_ms)  # the window's loop runs meanwhile
    out, _ = proc.communicate(timeout=10)
    report = json.loads(out)
    assert proc.returncode == 0 and "error" not in report, report
    return report["results"]


def ask_window(qtbot, w, text: str) -> None:
    w.input.setPlainText(text)
    qtbot.keyClick(w.input, Qt.Key_Return)
    qtbot.waitUntil(lambda: w.generating, timeout=10000)


@pytest.mark.parametrize(
    "clients, per_client", [pytest.param(8, 4, id="8x4"), pytest.param(8, 20, id="8x20", marks=pytest.mark.slow)]
)
def test_the_window_serves_a_load_and_stays_responsive(qtbot, make_window, smollm2_path, clients, per_client):
    w = make_window()  # the real engine
    w.state.put("sampling_defaults", FAST)
    assert drop_file(w.chat.viewport(), str(smollm2_path))
    qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=60000)
    assert not w.errors, w.errors
    bar = w.serve_bar
    assert bar.start(0)

    # warm-up, as the measured round will run: pages, arenas, the reply's first rendering
    ask_window(qtbot, w, "Say hello.")
    warm = start_load(bar.url, clients, 2)
    qtbot.waitUntil(lambda: not w.generating, timeout=120000)
    finish_load(qtbot, warm, 300000)
    before = settled_rss()

    worsts: list[float] = []  # per round
    for _ in range(ATTEMPTS):
        probe = OwnStallProbe()
        probe.phase = "load"
        probe.start()
        served_before = bar.api.requests_served
        load = start_load(bar.url, clients, per_client)
        qtbot.waitUntil(lambda: bar.api.requests_served >= served_before + clients, timeout=120000)
        ask_window(qtbot, w, "What is the capital of France?")  # in the middle of the load
        results = finish_load(qtbot, load, 600000)
        qtbot.waitUntil(lambda: not w.generating, timeout=120000)
        probe.stop()
        check_round(qtbot, w, bar, results, served_before)
        assert len(probe.gaps) > 50, "the probe hardly ticked"
        worsts.append(probe.unexcused_ms())
        probe.close()
        if min(worsts) < STALL_BOUND_MS:
            break

    after = settled_rss()
    assert abs(after - before) <= 0.05 * before, (before, after)
    assert min(worsts) < STALL_BOUND_MS, f"the window stopped for {min(worsts):.0f} ms under the load ({worsts})"
    bar.stop()


def check_round(qtbot, w, bar, results: list, served_before: int) -> None:
    """Every well-formed request answered, the window's reply complete, the server idle and alive."""
    assert all(ok for _, ok in results), [r for r in results if not r[1]]
    assert {kind for kind, _ in results} == {"ok", "cancel", "garbage"}
    assert bar.api.requests_served - served_before >= sum(kind == "ok" for kind, _ in results)
    assert not w.errors, w.errors
    assert w.state.messages()[-1].status == "complete" and w.state.messages()[-1].content
    qtbot.waitUntil(lambda: bar.owner.queue_length == 0, timeout=60000)
    assert bar.server_thread is not None and bar.server_thread.is_alive()
    assert httpx.get(bar.url.removesuffix("/v1") + "/health").json() == {"status": "ok", "queue": 0}
    bar.refresh()
    assert bar.count.text() == f"{bar.api.requests_served} requests"


def test_the_own_stall_probe_still_sees_work_and_waits_on_the_ui_thread(qtbot):
    """The probe's oracle: 120 ms of CPU spent on the UI thread, and 120 ms asleep on a lock
    another thread holds (as on the interpreter lock), are stalls; only run-queue time is left out."""
    import threading

    from PySide6.QtCore import QTimer

    def spin():
        end = time.thread_time() + 0.12  # CPU time: preemption on a busy machine does not shorten it
        while time.thread_time() < end:
            pass

    lock = threading.Lock()

    def wait_on_lock():
        lock.acquire()
        threading.Timer(0.12, lock.release).start()
        with lock:  # asleep until the timer's thread lets go
            pass

    for work in (spin, wait_on_lock):
        probe = OwnStallProbe()
        probe.start()
        qtbot.wait(200)
        QTimer.singleShot(0, work)
        qtbot.wait(300)
        probe.stop()
        assert probe.unexcused_ms() >= 110, work.__name__
        probe.close()
