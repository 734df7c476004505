"""The Help menu's diagnostics: About (every component's version), Copy diagnostics (the redacted
report of app/diagnostics.py on the clipboard, ready for a bug report), and the "Log conversation
text" switch (off by default; kept in the settings as "log_prompts").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QFontDatabase
from PySide6.QtWidgets import QApplication, QMenu, QMessageBox

from app import logs

if TYPE_CHECKING:
    from app.chats.store import ChatStore, Message

LOG_PROMPTS_KEY = "log_prompts"


def about_text() -> str:
    from app.diagnostics import version_line, version_report  # lazy: only Help needs it (start-up)

    return (
        f"{version_line()}\n\n"
        "Llambda: chat with language models on your own CPU, offline.\n"
        "Its inference engine is its own: C kernels driven from Python.\n\n" + version_report()
    )


# `window` below is the MainWindow, typed Any: app.ui.window imports this module, and these
# functions set attributes on it (about_box, the Help actions).


def show_about(window: Any) -> QMessageBox:
    box = QMessageBox(window)
    box.setObjectName("aboutBox")
    box.setWindowTitle("About Llambda")
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(about_text())
    box.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    window.about_box = box
    box.open()
    return box


def copy_diagnostics(window: Any) -> str:
    """Put the diagnostics report on the clipboard and say so; returns the text."""
    from app.diagnostics import diagnostics_text  # lazy: only Help needs it (start-up)

    text = diagnostics_text()
    QApplication.clipboard().setText(text)
    logs.get("ui").info("diagnostics copied to the clipboard (%d lines)", text.count("\n"))
    if hasattr(window, "show_notice"):
        window.show_notice(
            "Diagnostics copied: paste them into your bug report "
            "(home folder names and conversation text are left out)."
        )
    return text


def add_help_actions(window: Any, help_menu: QMenu) -> None:
    """About, Copy diagnostics and the log-prompts switch in `help_menu`."""
    about = QAction("&About Llambda", window)
    about.triggered.connect(lambda: show_about(window))
    copy = QAction("&Copy diagnostics", window)
    copy.setObjectName("copyDiagnosticsAction")
    copy.triggered.connect(lambda: copy_diagnostics(window))
    toggle = QAction("&Log conversation text", window)
    toggle.setObjectName("logPromptsAction")
    toggle.setCheckable(True)
    toggle.setStatusTip("Write prompts into the log file (off: the log holds figures only)")
    state = getattr(window, "state", None)
    on = bool(state.get(LOG_PROMPTS_KEY, False)) if state is not None else False
    toggle.setChecked(on)
    logs.set_log_prompts(on)

    def switched(checked: bool) -> None:
        logs.set_log_prompts(checked)
        if state is not None:
            state.put(LOG_PROMPTS_KEY, bool(checked))

    toggle.toggled.connect(switched)
    for a in (about, copy, toggle):
        help_menu.addAction(a)
        window.addAction(a)
    window.about_action, window.copy_diagnostics_action, window.log_prompts_action = about, copy, toggle


def model_identity_of(info: dict | None) -> dict | None:
    """The identity of the loaded model from the window's model facts (describe + engine)."""
    if not info:
        return None
    return {
        "name": info.get("name"),
        "sha256": info.get("sha256"),
        "quantization": info.get("file_type") or info.get("quantization"),
    }


def identity_tooltip(message: Message) -> str:
    """A reply's hover text: which model file answered, and with which Llambda ("" for the
    user's messages and replies from before schema v3)."""
    if getattr(message, "role", "") != "assistant" or not (
        getattr(message, "model_sha256", None) or getattr(message, "app_version", None)
    ):
        return ""
    parts = [f"Answered by {message.model or 'an unnamed model'}"]
    if message.model_quant:
        parts.append(message.model_quant)
    if message.model_sha256:
        parts.append(f"SHA-256 {message.model_sha256[:16]}…")
    if message.app_version:
        parts.append(f"Llambda {message.app_version}")
    return " · ".join(parts)


def show_model_identity(
    chat_view: Any, store: ChatStore, message_id: int
) -> None:  # Any: a ChatView (it imports this module)
    """Set the hover text of a reply just finished (the view built it before it was recorded)."""
    try:
        msg = store.get_message(message_id)
    except Exception as e:  # a missing row only loses a tooltip
        logs.get("ui").info("no model identity for message %s: %s", message_id, e)
        return
    for w in chat_view.messages:
        if w.message_id == message_id:
            w.setToolTip(identity_tooltip(msg))


__all__ = [
    "model_identity_of",
    "identity_tooltip",
    "show_model_identity",
    "show_about",
    "copy_diagnostics",
    "add_help_actions",
    "about_text",
    "LOG_PROMPTS_KEY",
]
