"""The strips around the chat: the model bar (picker, open, settings, info toggle), the progress
panel (pre-flight verdict, import/load progress, cancel), the composer (input, send, stop,
regenerate, edit banner, notices) and the start-up banner (what could not be done at start).
Views only: the window connects their widgets.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QStyle,
    QStyleOptionComboBox,
    QStylePainter,
    QVBoxLayout,
    QWidget,
)
from app.ui.qt_fix import emit


def _label(name: str, object_name: str = "") -> QLabel:
    label = QLabel()
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setAccessibleName(name)
    if object_name:
        label.setObjectName(object_name)
    return label


def _button(text: str, name: str, object_name: str = "", tip: str = "") -> QPushButton:
    b = QPushButton(text)
    b.setAccessibleName(name)
    if object_name:
        b.setObjectName(object_name)
    if tip:
        b.setToolTip(tip)
    return b


class ElidingComboBox(QComboBox):
    """A combo box whose current text ends in "…" when it is cut, with the whole text as tooltip."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.currentTextChanged.connect(self.setToolTip)

    def shown_text(self) -> str:
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        room = (
            self.style()
            .subControlRect(QStyle.ComplexControl.CC_ComboBox, opt, QStyle.SubControl.SC_ComboBoxEditField, self)
            .width()
        )
        return self.fontMetrics().elidedText(self.currentText(), Qt.TextElideMode.ElideRight, max(0, room - 2))

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QStylePainter(self)
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        opt.currentText = self.shown_text()
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, opt)
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, opt)


class ModelBar(QFrame):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("modelBar")
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 10, 6)
        self.title = QLabel("Model")
        self.title.setObjectName("modelBarLabel")
        row.addWidget(self.title)
        self.picker = ElidingComboBox()
        self.picker.setObjectName("modelPicker")
        self.picker.setAccessibleName("Model picker")
        self.picker.setMinimumWidth(110)
        self.picker.setMaximumWidth(560)
        self.picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.picker.setMinimumContentsLength(10)
        self.picker.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        row.addWidget(self.picker, 3)
        self.open_button = _button("Open model…", "Open a model file", tip="Open a GGUF model file (Ctrl+O)")
        row.addWidget(self.open_button)
        row.addStretch(1)
        self.settings_button = _button("Settings", "Settings")
        row.addWidget(self.settings_button)
        self.info_button = _button("Model info", "Show or hide model information")
        self.info_button.setCheckable(True)
        self.info_button.setChecked(True)
        row.addWidget(self.info_button)

    def resizeEvent(self, event: QResizeEvent) -> None:
        self.title.setVisible(event.size().width() >= 560)  # room for the picker first
        super().resizeEvent(event)


class ProgressPanel(QFrame):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("progressPanel")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 6, 12, 6)
        self.preflight_label = _label("Model check", "preflightLabel")
        lay.addWidget(self.preflight_label)
        row = QHBoxLayout()
        self.progress_label = _label("Progress")
        self.progress_label.setWordWrap(False)
        row.addWidget(self.progress_label)
        self.progress = QProgressBar()
        self.progress.setAccessibleName("Import and load progress")
        self.progress.setRange(0, 1000)
        row.addWidget(self.progress, 1)
        self.cancel_button = _button("Cancel", "Cancel the import")
        row.addWidget(self.cancel_button)
        lay.addLayout(row)
        self.hide()


class ChatInput(QPlainTextEdit):
    """Enter sends, Shift+Enter adds a line."""

    send_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("chatInput")
        self.setAccessibleName("Message")
        self.setPlaceholderText("Message Llambda — Enter to send, Shift+Enter for a new line")
        self.setAcceptDrops(False)
        self.setTabChangesFocus(True)
        self.setFixedHeight(84)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (
            event.modifiers() & Qt.KeyboardModifier.ShiftModifier
        ):
            emit(self.send_requested)
            event.accept()
            return
        super().keyPressEvent(event)


class Composer(QFrame):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("composer")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 8, 12, 8)
        lay.setSpacing(4)
        self.edit_banner = _label("Editing", "editBanner")
        self.edit_banner.setText("Editing a message: Enter resends it and replaces what followed; Esc cancels.")
        self.edit_banner.hide()
        lay.addWidget(self.edit_banner)
        self.attachments = QFrame()
        self.attachments.setObjectName("attachments")
        self.attachments_row = QVBoxLayout(self.attachments)
        self.attachments_row.setContentsMargins(0, 0, 0, 0)
        self.attachments_row.setSpacing(2)
        self.attachments.hide()
        lay.addWidget(self.attachments)
        row = QHBoxLayout()
        self.input = ChatInput()
        buttons = QVBoxLayout()
        self.send_button = _button("Send", "Send message", "sendButton")
        self.stop_button = _button("Stop", "Stop generating", "stopButton", "Stop (Esc)")
        self.regenerate_button = _button("Regenerate", "Regenerate the last reply", tip="Regenerate (Ctrl+R)")
        self.attach_button = _button(
            "Attach…",
            "Attach a file",
            tip="Attach a text, Markdown, source or PDF file to the message (or drop it on the window)",
        )
        self.attach_button.setObjectName("attachButton")
        row.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.input, 1)
        for b in (self.send_button, self.stop_button, self.regenerate_button):
            buttons.addWidget(b)
        row.addLayout(buttons)
        lay.addLayout(row)
        self.notice = _label("Notice", "notice")
        self.notice.hide()
        lay.addWidget(self.notice)


class StartupBanner(QFrame):
    """What went wrong at start-up (a folder that cannot be written, a database set aside), one
    line each. Unlike the composer's notice, which the next action replaces, it stays until the
    user dismisses it. The text can be selected, to copy a path from it."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("startupBanner")
        self.setAccessibleName("Start-up problems")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        self.label = _label("Start-up problems", "notice")
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.dismiss_button = _button("Dismiss", "Dismiss the start-up problems", "dismissStartup")
        self.dismiss_button.clicked.connect(self.hide)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_lines(self, lines: list[str]) -> None:
        self.label.setText("\n".join(lines))
        self.setVisible(bool(lines))


__all__ = ["ModelBar", "ProgressPanel", "ChatInput", "Composer", "StartupBanner"]
