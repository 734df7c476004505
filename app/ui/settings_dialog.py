"""The settings dialog: this conversation's system prompt and sampling, the engine's context
length, threads (0 = automatic), context-overflow policy, the disk kept for saved
conversation states and speculative decoding (off, prompt lookup, or a draft model: automatic or
one of the library's compatible drafts for the open model), and the look (system, light or dark).
Each setting has one line under it saying what it does; Reset to defaults puts the defaults
back (the system prompt stays). It only edits plain dicts; the window saves them through
`ChatState.save_settings` and the theme through the settings store.
"""

from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QGroupBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app import defaults as D
from app.chats.settings import MAX_DRAFT_MAX, MAX_KV_BUDGET_MB
from app.ui.state import ENGINE_DEFAULTS, OVERFLOW_POLICIES

THEMES = (("system", "Follow the system"), ("light", "Light"), ("dark", "Dark"))

HELP = {
    "System prompt": "Instructions the model reads before the conversation: a role, a tone, rules.",
    "Temperature": "Randomness: 0 always picks the likeliest word; 0.7 is lively; above 1.2 it rambles.",
    "Top-k": "Only the k likeliest next tokens can be picked (off: no limit).",
    "Top-p": "Only the likeliest tokens that together make up this share of the chance can be picked.",
    "Min-p": "Tokens less likely than this fraction of the likeliest one are never picked.",
    "Repeat penalty": "Above 1 makes repeating recent words less likely; 1 turns it off.",
    "Seed": "The same seed, settings and prompt give the same reply; random: a new one each time.",
    "Max tokens": "The longest a reply can be; a reply stopped by it offers Continue.",
    "Context length": "How many tokens the model keeps in view; more costs memory (reloads the model).",
    "Threads": "CPU threads for the engine; automatic uses one per physical core (reloads the model).",
    "When the context is full": "Go on by forgetting the oldest messages, or stop the reply.",
    "Saved conversation states": "Disk kept so a conversation you reopen answers at once; "
    "the least recently used go first (off: none kept).",
    "Speculation": "Guess tokens ahead and check several at once: the same reply, sooner (reloads the model).",
    "Most guesses per pass": "The most tokens guessed ahead each time; more pays when guesses are often right.",
    "Theme": "Light or dark colours, or the same as the rest of your desktop.",
}

SPECULATION_LABELS = {
    "off": "Off: one token at a time",
    "lookup": "From the conversation (prompt lookup)",
    "auto": "Draft model: automatic (the smallest compatible in the library)",
}


def speculation_choices(drafts: dict[str, str], current: tuple[str, str]) -> list[tuple[str, str, str]]:
    """(label, mode, draft) of each choice: off, prompt lookup, an automatic draft, each
    compatible draft by name, and the saved draft when it is not among them (kept, not lost)."""
    out = [
        (SPECULATION_LABELS["off"], "off", ""),
        (SPECULATION_LABELS["lookup"], "lookup", ""),
        (SPECULATION_LABELS["auto"], "draft", "auto"),
    ]
    out += [(f"Draft model: {name}", "draft", path) for path, name in drafts.items()]
    mode, draft = current
    if mode == "draft" and draft not in [c[2] for c in out]:
        out.append(
            (f"Draft model: {os.path.basename(draft)} (not in the library's choices for this model)", "draft", draft)
        )
    return out


OVERFLOW_LABELS = {
    "shift": "Drop the oldest messages and go on (context shift)",
    "stop": "Stop the reply when the context is full",
}


def _with_help(widget: QWidget, name: str) -> QWidget:
    """The control with its one line of help under it."""
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 4)
    lay.setSpacing(1)
    lay.addWidget(widget)
    note = QLabel(HELP[name])
    note.setObjectName("settingHelp")
    note.setTextFormat(Qt.TextFormat.PlainText)
    note.setWordWrap(False)  # one line each: wrapped labels in a form get cut in height
    note.setAccessibleName(f"{name}: help")
    widget.setToolTip(HELP[name])
    lay.addWidget(note)
    return box


class SettingsDialog(QDialog):
    def __init__(
        self,
        system_prompt: str,
        sampling: dict,
        engine: dict,
        max_threads: int,
        parent: QWidget | None = None,
        theme: str = "system",
        measured: dict | None = None,
        drafts: dict | None = None,
    ):
        """measured: the thread counts `llambda bench --threads auto` found fastest
        (app.engine.threads.load_measured()); when given, a button offers the generation one.
        drafts: the library's models that can draft for the open model ({path: name})."""
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settingsDialog")
        self.setAccessibleName("Settings")
        outer = QVBoxLayout(self)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        content = QWidget()
        lay = QVBoxLayout(content)
        lay.setContentsMargins(0, 0, 6, 0)

        chat = QGroupBox("This conversation")
        form = QFormLayout(chat)
        self.system_prompt = QPlainTextEdit(system_prompt)
        self.system_prompt.setAccessibleName("System prompt")
        self.system_prompt.setPlaceholderText("Optional instructions for the model in this conversation")
        self.system_prompt.setFixedHeight(80)
        form.addRow("System prompt", _with_help(self.system_prompt, "System prompt"))

        def dspin(name: str, lo: float, hi: float, step: float, value: float, decimals: int = 2) -> QDoubleSpinBox:
            w = QDoubleSpinBox()
            w.setRange(lo, hi)
            w.setSingleStep(step)
            w.setDecimals(decimals)
            w.setValue(float(value))
            w.setAccessibleName(name)
            form.addRow(name, _with_help(w, name))
            return w

        def ispin(
            name: str, lo: int, hi: int, value: int, special: str | None = None, target: QFormLayout | None = None
        ) -> QSpinBox:
            w = QSpinBox()
            w.setRange(lo, hi)
            w.setValue(int(value))
            w.setAccessibleName(name)
            if special:
                w.setSpecialValueText(special)
            (target or form).addRow(name, _with_help(w, name))
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
        self.n_ctx = ispin("Context length", 0, 1 << 20, engine["n_ctx"], "automatic (what fits)", target=eform)
        self.n_ctx.setSingleStep(256)
        self.kv_type = QComboBox()
        self.kv_type.setAccessibleName("KV cache")
        for key, label in (("f16", "16-bit (f16)"), ("q8_0", "8-bit (q8_0): half the memory"), ("f32", "32-bit (f32)")):
            self.kv_type.addItem(label, key)
        self.kv_type.setCurrentIndex(max(0, self.kv_type.findData(engine.get("kv_type", "f16"))))
        eform.addRow("KV cache", self.kv_type)
        self.threads = ispin(
            "Threads",
            0,
            max(1, max_threads),
            min(int(engine["threads"]), max(1, max_threads)),
            "automatic",
            target=eform,
        )
        self.use_measured = None
        fastest = measured or {}
        best = fastest.get("tg_threads") or fastest.get("pp_threads")
        if best:
            pp = fastest.get("pp_threads")
            self.use_measured = QPushButton(f"Use the measured fastest: {best}")
            self.use_measured.setAccessibleName("Use the measured fastest thread count")
            self.use_measured.setToolTip(
                f"llambda bench --threads auto ({fastest.get('when', '')}) found {best} threads fastest "
                f"for replies" + (f" and {pp} for reading prompts" if pp else "")
            )
            self.use_measured.clicked.connect(lambda: self.threads.setValue(min(int(best), self.threads.maximum())))
            eform.addRow("", self.use_measured)
        self.overflow = QComboBox()
        self.overflow.setAccessibleName("When the context is full")
        for key in OVERFLOW_POLICIES:
            self.overflow.addItem(OVERFLOW_LABELS[key], key)
        self.overflow.setCurrentIndex(
            max(0, OVERFLOW_POLICIES.index(engine["overflow"]) if engine["overflow"] in OVERFLOW_POLICIES else 0)
        )
        eform.addRow("When the context is full", _with_help(self.overflow, "When the context is full"))
        self.kv_budget = ispin(
            "Saved conversation states",
            0,
            MAX_KV_BUDGET_MB,
            engine.get("kv_budget_mb", ENGINE_DEFAULTS["kv_budget_mb"]),
            "off",
            target=eform,
        )
        self.kv_budget.setSuffix(" MB")
        self.kv_budget.setSingleStep(256)
        self.speculation = QComboBox()
        self.speculation.setAccessibleName("Speculation")
        current = (
            engine.get("speculation", ENGINE_DEFAULTS["speculation"]),
            engine.get("draft", ENGINE_DEFAULTS["draft"]),
        )
        self.speculation_choices = speculation_choices(dict(drafts or {}), current)
        for label, _, _ in self.speculation_choices:
            self.speculation.addItem(label)
        self.speculation.setCurrentIndex(self._speculation_index(*current))
        eform.addRow("Speculation", _with_help(self.speculation, "Speculation"))
        self.draft_max = ispin(
            "Most guesses per pass",
            1,
            MAX_DRAFT_MAX,
            engine.get("draft_max", ENGINE_DEFAULTS["draft_max"]),
            target=eform,
        )
        self.speculation.currentIndexChanged.connect(
            lambda i: self.draft_max.setEnabled(self.speculation_choices[i][1] != "off")
        )
        self.draft_max.setEnabled(current[0] != "off")
        lay.addWidget(eng)

        look = QGroupBox("Appearance")
        lform = QFormLayout(look)
        self.theme = QComboBox()
        self.theme.setAccessibleName("Theme")
        for key, label in THEMES:
            self.theme.addItem(label, key)
        self.theme.setCurrentIndex(max(0, [k for k, _ in THEMES].index(theme) if theme in dict(THEMES) else 0))
        lform.addRow("Theme", _with_help(self.theme, "Theme"))
        lay.addWidget(look)

        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save
            | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults
        )
        self.reset_button = buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        self.reset_button.setText("Reset to defaults")
        self.reset_button.setAccessibleName("Reset to defaults")
        self.reset_button.clicked.connect(self.reset_to_defaults)
        buttons.button(QDialogButtonBox.StandardButton.Save).setAccessibleName("Save settings")
        buttons.button(QDialogButtonBox.StandardButton.Cancel).setAccessibleName("Cancel")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        scroll.setWidget(content)
        outer.addWidget(scroll, 1)
        outer.addWidget(buttons)
        self.scroll_area = scroll  # not `scroll`: that is QWidget.scroll()
        # as tall as the settings need, but never taller than the screen (a scroll bar then)
        need = content.sizeHint()
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        height = need.height() + buttons.sizeHint().height() + 40
        if screen is not None:
            height = min(height, int(screen.height() * 0.9))
        self.resize(max(640, need.width() + 40), height)

    def reset_to_defaults(self) -> None:
        """Every sampling, engine and look setting back to its default (not yet saved; the
        system prompt is kept: it is this conversation's text, not a setting)."""
        # app.defaults' constants: what SAMPLING_DEFAULTS and ENGINE_DEFAULTS hold, typed one by one
        self.temperature.setValue(D.TEMPERATURE)
        self.top_k.setValue(D.TOP_K)
        self.top_p.setValue(D.TOP_P)
        self.min_p.setValue(D.MIN_P)
        self.repeat_penalty.setValue(D.REPEAT_PENALTY)
        self.seed.setValue(D.SEED)
        self.max_tokens.setValue(D.MAX_TOKENS)
        self.n_ctx.setValue(D.N_CTX)
        self.threads.setValue(D.THREADS)
        self.overflow.setCurrentIndex(OVERFLOW_POLICIES.index(D.OVERFLOW))
        self.kv_budget.setValue(D.KV_BUDGET_MB)
        self.speculation.setCurrentIndex(self._speculation_index(D.SPECULATION, D.DRAFT))
        self.draft_max.setValue(D.DRAFT_MAX)
        self.theme.setCurrentIndex(0)

    def _speculation_index(self, mode: str, draft: str) -> int:
        for i, (_, m, d) in enumerate(self.speculation_choices):
            if m == mode and (m != "draft" or d == draft):
                return i
        return 1  # prompt lookup, the default

    def theme_choice(self) -> str:
        return self.theme.currentData()

    def values(self) -> tuple[str, dict, dict]:
        sampling = {
            "temperature": round(self.temperature.value(), 4),
            "top_k": self.top_k.value(),
            "top_p": round(self.top_p.value(), 4),
            "min_p": round(self.min_p.value(), 4),
            "repeat_penalty": round(self.repeat_penalty.value(), 4),
            "seed": self.seed.value(),
            "max_tokens": self.max_tokens.value(),
        }
        engine = {
            "n_ctx": self.n_ctx.value(),
            "threads": self.threads.value(),
            "overflow": self.overflow.currentData(),
            "kv_type": self.kv_type.currentData(),
            "kv_budget_mb": self.kv_budget.value(),
        }
        _, mode, draft = self.speculation_choices[self.speculation.currentIndex()]
        engine.update(
            {"speculation": mode, "draft": draft or ENGINE_DEFAULTS["draft"], "draft_max": self.draft_max.value()}
        )
        return self.system_prompt.toPlainText(), sampling, engine


__all__ = ["SettingsDialog"]
