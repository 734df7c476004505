"""Prompt progress as people read it, and a ticker for figures while the engine is inside C.

`PromptMeter` turns the engine's per-batch (tokens done, tokens to do) into tokens read, the
rate so far and an estimate of the time left; the worker updates it at each batch and its
`Ticker` reads it between batches (a batch of a big model can take half a minute), so the
window never looks frozen. No Qt here.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

Publish = Callable[[dict], None]  # gets the figures, under the meter's lock

MIN_TOKENS_FOR_SPEED = 16  # fewer new prompt tokens give no meaningful prompt speed


class PromptMeter:
    """Prompt progress as people read it: tokens decoded of those to decode, the rate so far,
    and an estimate of the time left. Updated by the worker (at each batch) and read by its
    ticker between batches, so one lock guards it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.t0 = time.monotonic()
        self.done = self.total = self.reused = 0
        self.active = False
        self._last_batch_at = self.t0

    def update(self, done: int, total: int, reused: int, publish: Publish | None = None) -> dict:
        """Record a batch; `publish(figures)` runs under the lock, so figures reach the window
        in the order they were taken (the ticker's estimate never lands after a newer batch)."""
        with self._lock:
            now = time.monotonic()
            if not self.active and done == 0:
                self.t0 = now
            self.active = done < total
            self.done, self.total, self.reused = done, total, reused
            self._last_batch_at = now
            figures = self._figures(now)
            if publish is not None:
                publish(figures)
            return figures

    def finish(self) -> None:
        with self._lock:
            self.active = False

    def estimate(self, publish: Publish | None = None) -> dict | None:
        """The figures now, between batches (None once the prompt is read); `publish` as in
        `update`."""
        with self._lock:
            if not self.active:
                return None
            figures = self._figures(time.monotonic())
            if publish is not None:
                publish(figures)
            return figures

    def _figures(self, now: float) -> dict:
        elapsed = max(0.0, now - self.t0)
        rate = self.done / (self._last_batch_at - self.t0) if self.done and self._last_batch_at > self.t0 else 0.0
        left = self.total - self.done
        eta = max(0.0, left / rate - (now - self._last_batch_at)) if rate > 0 and left > 0 else None
        return {
            "done": self.done,
            "total": self.total,
            "reused": self.reused,
            "tok_s": rate or None,
            "eta_s": eta,
            "elapsed_s": elapsed,
            "active": self.active,
        }


class Ticker:
    """Calls `fn` every `every` seconds from a daemon thread until `stop()`."""

    def __init__(self, every: float, fn: Callable[[], object]):
        self._stop = threading.Event()
        self._fn = fn
        self._every = every
        self._thread = threading.Thread(target=self._run, name="llambda-ticker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._fn()
            except Exception:
                pass  # a figure that cannot be read is skipped, the next tick retries

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(2.0)


__all__ = ["PromptMeter", "Ticker", "MIN_TOKENS_FOR_SPEED"]
