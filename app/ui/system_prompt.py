"""The system prompt where people look for it: a strip at the top of the chat, folded to one
line ("System prompt: You are a helpful…  Edit"), that opens to edit it, pick a preset (a few
built in, plus the user's own) and make it the default for new chats. View only: the window
saves what it asks for.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.ui.qt_fix import emit

BUILTIN_PRESETS = {
    "No system prompt": "",
    "Helpful assistant": "You are a helpful assistant. Answer clearly and accurately; say so when you are not sure.",
    "Concise": "Answer in as few words as possible. No introductions, no summaries.",
    "Teacher": "You are a patient teacher. Explain step by step with simple examples, and check "
    "understanding with a short question at the end.",
    "Programmer": "You are an expert programmer. Give working code first, then a short explanation. "
    "Use fenced code blocks with the language named.",
}


class SystemPromptBar(QFrame):
    applied = Signal(str)  # the text to use in this conversation
    preset_saved = Signal(str, str)  # name, text
    default_requested = Signal(str)  # the text new chats start with

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("systemPromptBar")
        self.setAccessibleName("System prompt")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 4, 12, 4)
        lay.setSpacing(4)
        head = QHBoxLayout()
        self.toggle = QPushButton("System prompt")
        self.toggle.setObjectName("systemPromptToggle")
        self.toggle.setCheckable(True)
        self.toggle.setAccessibleName("Show or edit the system prompt")
        self.toggle.setToolTip("The instructions the model reads before this conversation")
        self.toggle.toggled.connect(self.on_toggle_toggled)
        head.addWidget(self.toggle)
        self.summary = QLabel()
        self.summary.setObjectName("systemPromptSummary")
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        head.addWidget(self.summary, 1)
        lay.addLayout(head)

        self.body = QFrame()
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("Preset"))
        self.presets = QComboBox()
        self.presets.setAccessibleName("System prompt presets")
        self.presets.activated.connect(self.on_presets_activated)
        row.addWidget(self.presets, 1)
        body.addLayout(row)
        self.editor = QPlainTextEdit()
        self.editor.setAccessibleName("System prompt text")
        self.editor.setPlaceholderText("Instructions for the model in this conversation (optional)")
        self.editor.setFixedHeight(72)
        body.addWidget(self.editor)
        buttons = QHBoxLayout()
        self.save_preset_button = QPushButton("Save as preset…")
        self.save_preset_button.clicked.connect(self.on_save_preset_button_clicked)
        self.default_button = QPushButton("Use for new chats")
        self.default_button.setToolTip("New chats start with this system prompt")
        self.default_button.clicked.connect(lambda: emit(self.default_requested, self.editor.toPlainText()))
        self.apply_button = QPushButton("Apply")
        self.apply_button.setObjectName("sendButton")
        self.apply_button.clicked.connect(self.on_apply_button_clicked)
        buttons.addWidget(self.save_preset_button)
        buttons.addWidget(self.default_button)
        buttons.addStretch(1)
        buttons.addWidget(self.apply_button)
        body.addLayout(buttons)
        self.body.hide()
        lay.addWidget(self.body)
        self.text = ""
        self.user_presets: dict[str, str] = {}
        self.ask_name = None  # tests replace the name dialog

    def set_presets(self, user_presets: dict) -> None:
        self.user_presets = {str(k): str(v) for k, v in (user_presets or {}).items()}
        self.presets.clear()
        self.presets.addItem("Choose a preset…", None)
        for name, text in {**BUILTIN_PRESETS, **self.user_presets}.items():
            self.presets.addItem(name, text)

    def show_prompt(self, text: str) -> None:
        self.text = text or ""
        first = " ".join(self.text.split())
        self.summary.setText(first if first else "none (the model's own default behaviour)")
        self.summary.setToolTip(self.text)
        if not self.body.isVisible():
            self.editor.setPlainText(self.text)

    def on_toggle_toggled(self, checked: bool) -> None:
        self.editor.setPlainText(self.text)
        self.body.setVisible(checked)
        self.summary.setVisible(not checked)
        if checked:
            self.editor.setFocus()

    def on_presets_activated(self, index: int) -> None:
        text = self.presets.itemData(index)
        if text is not None:
            self.editor.setPlainText(text)

    def on_apply_button_clicked(self) -> None:
        emit(self.applied, self.editor.toPlainText())
        self.toggle.setChecked(False)

    def on_save_preset_button_clicked(self) -> None:
        if self.ask_name is not None:
            name = self.ask_name()
        else:
            name, ok = QInputDialog.getText(self, "Save preset", "Name of the preset")
            name = name if ok else ""
        name = " ".join((name or "").split())
        if name:
            emit(self.preset_saved, name, self.editor.toPlainText())


__all__ = ["SystemPromptBar", "BUILTIN_PRESETS"]
