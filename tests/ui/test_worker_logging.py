"""The worker never swallows an error silently: what it cannot act on, it logs."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from app.ui.worker import EngineWorker


class BrokenEngine:
    def cancel(self):
        raise RuntimeError("cancel exploded")

    def pool_counters(self):
        raise RuntimeError("no counters")

    def context_used(self):
        raise OSError("no context figures")

    def close(self):
        raise RuntimeError("close exploded")


def test_no_silent_except_blocks_are_left():
    src = (Path(__file__).resolve().parents[2] / "app" / "ui" / "worker.py").read_text()
    assert not re.search(r"except Exception:\s*\n\s*pass", src)
    assert not re.search(r"except Exception:\s*#[^\n]*\n\s*pass", src)


def test_failures_the_worker_cannot_act_on_are_logged_once(qtbot, caplog):
    caplog.set_level(logging.INFO, logger="llambda")
    w = EngineWorker(BrokenEngine)
    w._engine = BrokenEngine()
    w.cancel()
    for _ in range(3):
        assert w.live_counters() == {}
    w.on_window_closing()
    text = caplog.text
    assert "engine.cancel() failed: RuntimeError: cancel exploded" in text
    assert text.count("thread counters unavailable") == 1
    assert text.count("context figures unavailable") == 1
    assert "closing the engine failed: RuntimeError: close exploded" in text
    w.deleteLater()


def test_a_failed_load_is_logged_with_its_reason(qtbot, caplog, tmp_path):
    caplog.set_level(logging.INFO, logger="llambda")
    w = EngineWorker(BrokenEngine)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file")
    reasons = []
    w.load_failed.connect(reasons.append)
    w.on_window_load_requested(str(bad), {})
    assert reasons and reasons[0] in caplog.text and "load failed" in caplog.text
    w.deleteLater()
