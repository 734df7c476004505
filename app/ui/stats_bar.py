"""The live figures under the chat: generation and prompt speed, time to first token, context
used, process memory next to the model's size, and kernel threads busy / pool size.

Figures from the worker arrive as plain dicts (`on_worker_stats_updated`); process memory is
read here on a timer, so the bar moves at least twice a second even between tokens.
"""

from __future__ import annotations

import os

from PySide6.QtCore import QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from app.units import format_size

REFRESH_MS = 400


def _mb(n: float | None) -> str:
    if not n:
        return "–"
    return format_size(n)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    m, s = divmod(seconds, 60)
    return f"{m} min {s:02d} s" if m < 60 else f"{m // 60} h {m % 60:02d} min"


def prompt_progress_text(p: dict, short: bool = False) -> str:
    """The prompt being read, as people read it: "Reading the prompt: 512 / 1,842 tokens ·
    21 tok/s · about 1 min 03 s left" (short: the status bar's form)."""
    done, total = int(p.get("done") or 0), int(p.get("total") or 0)
    rate, eta = p.get("tok_s"), p.get("eta_s")
    parts = [f"{done:,}/{total:,} tok" if short else f"Reading the prompt: {done:,} / {total:,} tokens"]
    reused = int(p.get("reused") or 0)
    if reused and not short:
        parts[0] += f" ({reused:,} already read)"
    if rate:
        parts.append(f"{rate:.0f} tok/s" if rate >= 10 else f"{rate:.1f} tok/s")
    if eta is not None:
        parts.append(f"about {_duration(eta)} left" if not short else f"{_duration(eta)} left")
    elif not short or not rate:
        parts.append(f"{_duration(float(p.get('elapsed_s') or 0.0))} so far")
    return (" · " if not short else ", ").join(parts)


def _rss() -> int:
    try:
        import psutil  # lazy: slow to import (preload_modules loads it once the window is built)

        return int(psutil.Process(os.getpid()).memory_info().rss)
    except Exception:
        return 0


class StatsBar(QWidget):
    FIELDS = ("gen", "prompt", "ttft", "ctx", "mem", "threads")
    TIPS = {
        "gen": "Generation speed: tokens per second while writing the reply",
        "prompt": "Prompt processing speed: tokens per second while reading the conversation",
        "ttft": "Time to first token",
        "ctx": "Context used / context length, in tokens",
        "mem": "Memory used by Llambda (resident set size) / size of the model file",
        "threads": "Kernel threads busy / thread pool size",
    }

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("statsBar")
        self.setAccessibleName("Live statistics")
        lay = self._row = QHBoxLayout(self)
        lay.setContentsMargins(8, 2, 8, 2)
        lay.setSpacing(12)
        self.labels: dict[str, QLabel] = {}
        for key in self.FIELDS:
            label = QLabel()
            label.setObjectName(f"stat_{key}")
            label.setAccessibleName(self.TIPS[key])
            label.setToolTip(self.TIPS[key])
            self.labels[key] = label
            lay.addWidget(label)
        lay.addStretch(1)
        self.figures: dict = {}
        self.compact = False
        self.model_bytes = 0
        self.updates = 0  # how many times the text was refreshed (tests)
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.on_timer_timeout)
        self.timer.start()
        self.refresh()

    def set_model(self, model_bytes: int, n_ctx: int | None, pool_size: int | None) -> None:
        self.model_bytes = int(model_bytes or 0)
        if n_ctx:
            self.figures["n_ctx"] = n_ctx
        if pool_size:
            self.figures["pool_size"] = pool_size
        self.refresh()

    def on_worker_stats_updated(self, figures: dict) -> None:
        self.figures.update(figures)
        self.refresh()

    def show_chat(self, figures: dict | None, n_ctx: int | None) -> None:
        """The figures of the chat on screen (its last reply with this model), or none: what
        another chat or model left here goes."""
        keep = {k: self.figures[k] for k in ("pool_size",) if k in self.figures}
        self.figures = {**keep, "n_ctx": n_ctx, "threads_busy": 0.0, "prompt": None}
        if figures:
            self.figures.update(
                {
                    k: v
                    for k, v in figures.items()
                    if k
                    in (
                        "gen_tok_s",
                        "prompt_tok_s",
                        "ttft_s",
                        "n_ctx_used",
                        "prompt_tokens",
                        "prompt_evaluated",
                        "prompt_reused",
                    )
                }
            )
        self.refresh()

    def on_timer_timeout(self) -> None:
        self.refresh()

    def text(self) -> str:
        return "   ".join(self.labels[k].text() for k in self.FIELDS)

    COMPACT_BELOW = 1050  # px of the bar: shorter words below this, so nothing is cut

    def resizeEvent(self, event: QResizeEvent) -> None:
        compact = event.size().width() < self.COMPACT_BELOW
        if compact != self.compact:
            self.compact = compact
            self._row.setSpacing(8 if compact else 12)
            self.refresh()
        super().resizeEvent(event)

    def refresh(self) -> None:
        f = self.figures
        c = self.compact
        gen = f.get("gen_tok_s")
        pp = f.get("prompt_tok_s")
        ttft = f.get("ttft_s")
        unit = "t/s" if c else "tok/s"
        tpp = f.get("spec_tokens_per_pass")
        spec = (
            f" ({tpp:.1f} tok/pass, {f.get('spec_acceptance', 0):.0%} of guesses kept, ×{f.get('spec_speedup', 1):.2f})"
            if tpp and f.get("spec_passes") and not c
            else ""
        )
        self.labels["gen"].setText(f"gen {gen:.1f} {unit}{spec}" if gen else f"gen – {unit}")
        progress = f.get("prompt")
        reused = int(f.get("prompt_reused") or 0)
        new = f.get("prompt_evaluated")
        name = "pp" if c else "prompt"
        if progress:
            text = f"{name} " + prompt_progress_text(progress, short=True)
        elif pp and reused:
            text = f"{name} {pp:.0f} {unit}, {reused} reused"
        elif pp:
            text = f"{name} {pp:.0f} {unit}"
        elif reused:
            text = f"{name} {reused} reused + {new} new" if new is not None else f"{name}: {reused} tok reused"
        else:
            text = f"{name} – {unit}"
        self.labels["prompt"].setText(text.replace("tok/s", unit))
        self.labels["ttft"].setText(
            f"{'ttft' if c else 'first token'} {ttft:.2f} s"
            if ttft is not None
            else ("ttft –" if c else "first token –")
        )
        n_ctx = f.get("n_ctx")
        used = f.get("n_ctx_used")
        self.labels["ctx"].setText(
            f"{'ctx' if c else 'context'} {used if used is not None else '–'}/{n_ctx}"
            if n_ctx
            else ("ctx –" if c else "context –")
        )
        self.labels["mem"].setText(f"RAM {_mb(_rss())}" if c else f"RAM {_mb(_rss())} · model {_mb(self.model_bytes)}")
        size = f.get("pool_size")
        busy = f.get("threads_busy", 0.0) or 0.0
        self.labels["threads"].setText(
            (f"thr {busy:.1f}/{size}" if c else f"threads {busy:.1f}/{size} busy")
            if size
            else ("thr –" if c else "threads –")
        )
        self.updates += 1


__all__ = ["StatsBar", "prompt_progress_text"]
