"""The settings dialog: this conversation's system prompt and sampling, and the engine's context
length, threads (0 = automatic) and context-overflow policy. It only edits plain dicts; the
window saves them through `ChatState.save_settings`.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFormLayout, QGroupBox, QPlainTextEdit,
    QPushButton, QSpinBox, QVBoxLayout,
)

from app.ui.state import OVERFLOW_POLICIES

OVERFLOW_LABELS = {
    "shift": "Drop the oldest messages and go on (context shift)",
    "stop": "Stop the reply when the context is full",
}


class SettingsDialog(QDialog):
    def __init__(self, system_prompt: str, sampling: dict, engine: dict, max_threads: int, parent=None,
                 measured: dict | None = None):
        """measured: the thread counts `llambda bench --threads auto` found fastest
        (app.engine.threads.load_measured()); when given, a button offers the generation one."""
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settingsDialog")
        self.setAccessibleName("Settings")
        lay = QVBoxLayout(self)

        chat = QGroupBox("This conversation")
        form = QFormLayout(chat)
        self.system_prompt = QPlainTextEdit(system_prompt)
        self.system_prompt.setAccessibleName("System prompt")
        self.system_prompt.setPlaceholderText("Optional instructions for the model in this conversation")
        self.system_prompt.setFixedHeight(80)
        form.addRow("System prompt", self.system_prompt)

        def dspin(name, lo, hi, step, value, decimals=2):
            w = QDoubleSpinBox()
            w.setRange(lo, hi)
            w.setSingleStep(step)
            w.setDecimals(decimals)
            w.setValue(float(value))
            w.setAccessibleName(name)
            form.addRow(name, w)
            return w

        def ispin(name, lo, hi, value, special=None, target=None):
            w = QSpinBox()
            w.setRange(lo, hi)
            w.setValue(int(value))
            w.setAccessibleName(name)
            if special:
                w.setSpecialValueText(special)
            (target or form).addRow(name, w)
            return w

        self.temperature = dspin("Temperature", 0.0, 5.0, 0.05, sampling["temperature"])
        self.top_k = ispin("Top-k", 0, 100000, sampling["top_k"], "off")
        self.top_p = dspin("Top-p", 0.0, 1.0, 0.01, sampling["top_p"])
        self.min_p = dspin("Min-p", 0.0, 1.0, 0.01, sampling["min_p"])
        self.repeat_penalty = dspin("Repeat penalty", 0.5, 3.0, 0.05, sampling["repeat_penalty"])
        self.seed = ispin("Seed", -1, 2**31 - 1, sampling["seed"], "random")
        self.max_tokens = ispin("Max tokens", 1, 1 << 20, sampling["max_tokens"])
        lay.addWidget(chat)

        eng = QGroupBox("Engine (applies to the loaded model)")
        eform = QFormLayout(eng)
        self.n_ctx = ispin("Context length", 128, 1 << 20, engine["n_ctx"], target=eform)
        self.n_ctx.setSingleStep(256)
        self.threads = ispin("Threads", 0, max(1, max_threads), min(int(engine["threads"]), max(1, max_threads)),
                             "automatic", target=eform)
        self.use_measured = None
        best = (measured or {}).get("tg_threads") or (measured or {}).get("pp_threads")
        if best:
            pp = measured.get("pp_threads")
            self.use_measured = QPushButton(f"Use the measured fastest: {best}")
            self.use_measured.setAccessibleName("Use the measured fastest thread count")
            self.use_measured.setToolTip(
                f"llambda bench --threads auto ({measured.get('when', '')}) found {best} threads fastest "
                f"for replies" + (f" and {pp} for reading prompts" if pp else ""))
            self.use_measured.clicked.connect(lambda: self.threads.setValue(min(int(best), self.threads.maximum())))
            eform.addRow("", self.use_measured)
        self.overflow = QComboBox()
        self.overflow.setAccessibleName("When the context is full")
        for key in OVERFLOW_POLICIES:
            self.overflow.addItem(OVERFLOW_LABELS[key], key)
        self.overflow.setCurrentIndex(max(0, OVERFLOW_POLICIES.index(engine["overflow"])
                                          if engine["overflow"] in OVERFLOW_POLICIES else 0))
        eform.addRow("When the context is full", self.overflow)
        lay.addWidget(eng)

        buttons = QDialogButtonBox(QDialogButtonBox.Save | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Save).setAccessibleName("Save settings")
        buttons.button(QDialogButtonBox.Cancel).setAccessibleName("Cancel")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)

    def values(self) -> tuple[str, dict, dict]:
        sampling = {
            "temperature": round(self.temperature.value(), 4), "top_k": self.top_k.value(),
            "top_p": round(self.top_p.value(), 4), "min_p": round(self.min_p.value(), 4),
            "repeat_penalty": round(self.repeat_penalty.value(), 4), "seed": self.seed.value(),
            "max_tokens": self.max_tokens.value(),
        }
        engine = {"n_ctx": self.n_ctx.value(), "threads": self.threads.value(),
                  "overflow": self.overflow.currentData()}
        return self.system_prompt.toPlainText(), sampling, engine


__all__ = ["SettingsDialog"]
