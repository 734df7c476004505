"""The error dialog: what went wrong (the precise one-line reason), what to do about it in plain
words (`app.ui.advice`), and Details (the reason with the facts around it: file, version,
kernels) that Copy puts on the clipboard for a bug report.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from app.ui.advice import advice_for


class ErrorDialog(QDialog):
    def __init__(self, title: str, reason: str, details: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setObjectName("errorDialog")
        self.setAccessibleName(title)
        self.reason = reason
        self.advice = advice_for(reason)
        self.details_text = "\n".join(x for x in (title, reason, details) if x)
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        icon = QLabel()
        icon.setPixmap(self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning).pixmap(40, 40))
        icon.setAlignment(Qt.AlignmentFlag.AlignTop)
        top.addWidget(icon)
        texts = QVBoxLayout()
        self.reason_label = QLabel(reason)
        self.reason_label.setObjectName("errorReason")
        self.reason_label.setTextFormat(Qt.TextFormat.PlainText)
        self.reason_label.setWordWrap(True)
        self.reason_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.reason_label.setAccessibleName("What went wrong")
        texts.addWidget(self.reason_label)
        self.advice_label = QLabel(self.advice)
        self.advice_label.setObjectName("errorAdvice")
        self.advice_label.setTextFormat(Qt.TextFormat.PlainText)
        self.advice_label.setWordWrap(True)
        self.advice_label.setAccessibleName("What to do")
        self.advice_label.setVisible(bool(self.advice))
        texts.addWidget(self.advice_label)
        top.addLayout(texts, 1)
        lay.addLayout(top)
        self.details = QPlainTextEdit(self.details_text)
        self.details.setObjectName("errorDetails")
        self.details.setReadOnly(True)
        self.details.setAccessibleName("Details")
        self.details.setFixedHeight(110)
        self.details.hide()
        lay.addWidget(self.details)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok)
        self.details_button = QPushButton("Details")
        self.details_button.setCheckable(True)
        self.details_button.setAccessibleName("Show the details")
        self.details_button.toggled.connect(self.details.setVisible)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setAccessibleName("Copy the details")
        self.copy_button.clicked.connect(self.on_copy_button_clicked)
        buttons.addButton(self.details_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.accepted.connect(self.accept)
        lay.addWidget(buttons)
        self.setMinimumWidth(420)

    def text(self) -> str:
        """The precise reason (as a QMessageBox's text)."""
        return self.reason

    def on_copy_button_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.details_text)
        self.copy_button.setText("Copied")
        QTimer.singleShot(1200, self.copy_button, lambda: self.copy_button.setText("Copy"))


__all__ = ["ErrorDialog"]
