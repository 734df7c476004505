"""The live figures under the chat: generation and prompt speed, time to first token, context
used, process memory next to the model's size, and kernel threads busy / pool size.

Figures from the worker arrive as plain dicts (`on_worker_stats_updated`); process memory is
read here on a timer, so the bar moves at least twice a second even between tokens.
"""

from __future__ import annotations

import os

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

REFRESH_MS = 400


def _mb(n: float | None) -> str:
    if not n:
        return "–"
    return f"{n / 2**30:.2f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def _rss() -> int:
    try:
        import psutil

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

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("statsBar")
        self.setAccessibleName("Live statistics")
        lay = QHBoxLayout(self)
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
        self.model_bytes = 0
        self.updates = 0                    # how many times the text was refreshed (tests)
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

    def on_timer_timeout(self) -> None:
        self.refresh()

    def text(self) -> str:
        return "   ".join(self.labels[k].text() for k in self.FIELDS)

    def refresh(self) -> None:
        f = self.figures
        gen = f.get("gen_tok_s")
        pp = f.get("prompt_tok_s")
        ttft = f.get("ttft_s")
        tpp = f.get("spec_tokens_per_pass")
        spec = (f" ({tpp:.1f} tok/pass, {f.get('spec_acceptance', 0):.0%} of guesses kept, "
                f"×{f.get('spec_speedup', 1):.2f})" if tpp and f.get("spec_passes") else "")
        self.labels["gen"].setText(f"gen {gen:.1f} tok/s{spec}" if gen else "gen – tok/s")
        self.labels["prompt"].setText(f"prompt {pp:.0f} tok/s" if pp else "prompt – tok/s")
        self.labels["ttft"].setText(f"first token {ttft:.2f} s" if ttft is not None else "first token –")
        n_ctx = f.get("n_ctx")
        self.labels["ctx"].setText(f"context {f.get('n_ctx_used', 0)}/{n_ctx}" if n_ctx else "context –")
        self.labels["mem"].setText(f"RAM {_mb(_rss())} · model {_mb(self.model_bytes)}")
        size = f.get("pool_size")
        busy = f.get("threads_busy", 0.0) or 0.0
        self.labels["threads"].setText(f"threads {busy:.1f}/{size} busy" if size else "threads –")
        self.updates += 1


__all__ = ["StatsBar"]
