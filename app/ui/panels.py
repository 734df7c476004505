"""Side panels of the window: the conversation list (new, rename in place, delete with undo,
search) and the model-info panel. Views only: they show what they are given and emit requests.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, cast

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.ui.markdown import plain_tooltip
from app.ui.qt_fix import emit
from app.units import format_size

if TYPE_CHECKING:
    from app.chats.store import Conversation

UNDO_SECONDS = 10


class ConversationPanel(QFrame):
    new_requested = Signal()
    selected = Signal(int)  # conversation id
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)
    undo_requested = Signal()
    search_changed = Signal(str)
    export_requested = Signal(int)  # conversation id

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("conversationPanel")
        self.setAccessibleName("Conversations")
        self.setAcceptDrops(False)
        self.setMinimumWidth(140)
        self.setMaximumWidth(320)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.setSpacing(6)
        self.new_button = QPushButton("+  New chat")
        self.new_button.setObjectName("newChat")
        self.new_button.setAccessibleName("New chat")
        self.new_button.setToolTip("New chat (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        lay.addWidget(self.new_button)
        self.search = QLineEdit()
        self.search.setObjectName("search")
        self.search.setPlaceholderText("Search chats (Ctrl+F)")
        self.search.setAccessibleName("Search conversations")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.search_changed)
        lay.addWidget(self.search)
        self.list = QListWidget()
        self.list.setObjectName("conversationList")
        self.list.setAccessibleName("Conversation list")
        self.list.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked | QAbstractItemView.EditTrigger.EditKeyPressed
        )
        self.list.setAcceptDrops(False)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setUniformItemSizes(True)
        self.list.currentItemChanged.connect(self.on_list_current_item_changed)
        self.list.itemChanged.connect(self.on_list_item_changed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self.on_list_context_menu_requested)
        self.list.installEventFilter(self)
        lay.addWidget(self.list, 1)
        row = QHBoxLayout()
        self.rename_button = QPushButton("Rename")
        self.rename_button.setAccessibleName("Rename the selected conversation")
        self.rename_button.setToolTip("Rename (F2)")
        self.rename_button.clicked.connect(self.on_rename_button_clicked)
        self.delete_button = QPushButton("Delete")
        self.delete_button.setAccessibleName("Delete the selected conversation")
        self.delete_button.clicked.connect(self.on_delete_button_clicked)
        row.addWidget(self.rename_button)
        row.addWidget(self.delete_button)
        lay.addLayout(row)
        self.undo_bar = QFrame()
        self.undo_bar.setObjectName("undoBar")
        ub = QHBoxLayout(self.undo_bar)
        ub.setContentsMargins(6, 4, 6, 4)
        self.undo_label = QLabel()
        self.undo_label.setTextFormat(Qt.TextFormat.PlainText)
        self.undo_label.setWordWrap(True)
        self.undo_button = QPushButton("Undo")
        self.undo_button.setAccessibleName("Undo delete")
        self.undo_button.clicked.connect(self.on_undo_button_clicked)
        ub.addWidget(self.undo_label, 1)
        ub.addWidget(self.undo_button)
        self.undo_bar.hide()
        lay.addWidget(self.undo_bar)
        self.undo_timer = QTimer(self)
        self.undo_timer.setSingleShot(True)
        self.undo_timer.timeout.connect(self.undo_bar.hide)
        self._filling = False

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        """Delete (or Backspace on macOS keyboards) deletes the selected chat; Undo brings it back."""
        if (
            obj is self.list
            and event.type() == QEvent.Type.KeyPress
            and cast(QKeyEvent, event).key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace)
            and self.list.state() != QAbstractItemView.State.EditingState
        ):
            self.on_delete_button_clicked()
            return True
        return super().eventFilter(obj, event)

    def context_menu(self, item: QListWidgetItem) -> "QMenu":
        conv_id = int(item.data(Qt.ItemDataRole.UserRole))
        menu = QMenu(self)
        menu.addAction("Rename", lambda: self.list.editItem(item))
        menu.addAction("Export…", lambda: emit(self.export_requested, conv_id))
        menu.addSeparator()
        menu.addAction("Delete", lambda: emit(self.delete_requested, conv_id))
        return menu

    def on_list_context_menu_requested(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is not None:
            self.list.setCurrentItem(item)
            self.context_menu(item).popup(self.list.viewport().mapToGlobal(pos))

    def show_conversations(self, conversations: Iterable[Conversation], current_id: int | None) -> None:
        self._filling = True
        try:
            self.list.clear()
            for c in conversations:
                item = QListWidgetItem(c.title or "Untitled")
                item.setData(Qt.ItemDataRole.UserRole, c.id)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                item.setToolTip(plain_tooltip(c.title))
                self.list.addItem(item)
                if c.id == current_id:
                    self.list.setCurrentItem(item)
        finally:
            self._filling = False

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return None if item is None else int(item.data(Qt.ItemDataRole.UserRole))

    def item_for(self, conv_id: int) -> QListWidgetItem | None:
        for i in range(self.list.count()):
            if int(self.list.item(i).data(Qt.ItemDataRole.UserRole)) == conv_id:
                return self.list.item(i)
        return None

    def show_undo(self, title: str) -> None:
        self.undo_label.setText(f"Deleted “{title}”")
        self.undo_bar.show()
        self.undo_timer.start(UNDO_SECONDS * 1000)

    def on_list_current_item_changed(self, current: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if not self._filling and current is not None:
            emit(self.selected, int(current.data(Qt.ItemDataRole.UserRole)))

    def on_list_item_changed(self, item: QListWidgetItem) -> None:
        if not self._filling:
            emit(self.rename_requested, int(item.data(Qt.ItemDataRole.UserRole)), item.text())

    def on_rename_button_clicked(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self.list.editItem(item)

    def on_delete_button_clicked(self) -> None:
        conv_id = self.current_id()
        if conv_id is not None:
            emit(self.delete_requested, conv_id)

    def on_undo_button_clicked(self) -> None:
        self.undo_bar.hide()
        emit(self.undo_requested)


def _count(n: object) -> str:
    if not isinstance(n, (int, float)) or n <= 0:
        return "–"
    for unit, div in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return str(int(n))


class ElidedLabel(QLabel):
    """One line that ends (or, for paths, middles) in "…" when it does not fit its width; the
    whole text is the tooltip. For unbreakable values: file paths, hashes."""

    def __init__(self, mode: Qt.TextElideMode = Qt.TextElideMode.ElideMiddle, parent: QWidget | None = None):
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setMinimumWidth(40)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(plain_tooltip(text))
        self._fit()

    def full_text(self) -> str:
        return self._full

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, self._mode, max(10, self.width() - 2))
        if shown != self.text():
            self.setText(shown)


def _break_long_words(text: str, limit: int = 28) -> str:
    """Words longer than `limit` (a hash, a long file name) get break opportunities, so a
    wrapping label never cuts them mid-word at its edge."""
    return " ".join(
        w if len(w) <= limit else "\u200b".join(w[i : i + limit] for i in range(0, len(w), limit))
        for w in text.split(" ")
    )


def _bytes(n: object) -> str:
    if not isinstance(n, (int, float)) or n <= 0:
        return "–"
    return format_size(n, mb_digits=1)


class ModelInfoPanel(QFrame):
    ROWS = (
        "Model",
        "Architecture",
        "Parameters",
        "Quantization",
        "Context",
        "File",
        "Size",
        "Chat template",
        "Kernels",
    )
    ELIDED = ("File",)  # a path does not wrap well: it ends in "…" in the middle instead

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("modelInfo")
        self.setMinimumWidth(220)
        self.setMaximumWidth(380)
        self.setAccessibleName("Model information")
        self.setAcceptDrops(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 10, 10, 10)
        title = QLabel("Model")
        title.setObjectName("panelTitle")
        lay.addWidget(title)
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        self.values: dict[str, QLabel] = {}
        for row in self.ROWS:
            v = ElidedLabel() if row in self.ELIDED else QLabel("–")
            v.setTextFormat(Qt.TextFormat.PlainText)
            v.setWordWrap(row not in self.ELIDED)
            v.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            v.setAccessibleName(row)
            self.values[row] = v
            form.addRow(row, v)
        lay.addLayout(form)
        self.notes = QLabel()
        self.notes.setObjectName("modelNotes")
        self.notes.setTextFormat(Qt.TextFormat.PlainText)
        self.notes.setWordWrap(True)
        lay.addWidget(self.notes)
        lay.addStretch(1)

    def show_info(self, info: dict | None) -> None:
        info = info or {}
        path = info.get("path") or ""
        ctx_train = info.get("context_length")
        n_ctx = info.get("n_ctx")
        ctx = f"{n_ctx} in use" if n_ctx else "–"
        if n_ctx and info.get("n_ctx_reason") and info["n_ctx_reason"] != "as asked":
            ctx += f": {info['n_ctx_reason']}"
        elif ctx_train:
            ctx += f" (trained for {ctx_train})"
        template = info.get("template_status") or (
            "present" if info.get("chat_template") else ("none: a fallback is used" if info else "–")
        )
        vals = {
            "Model": info.get("name") or (os.path.basename(path) if path else "none loaded"),
            "Architecture": info.get("architecture") or "–",
            "Parameters": _count(info.get("parameters")),
            "Quantization": info.get("file_type") or info.get("quantization") or "–",
            "Context": ctx,
            "File": path or "–",
            "Size": _bytes(info.get("file_size")),
            "Chat template": template,
            "Kernels": info.get("kernels") or "–",
        }
        for k, v in vals.items():
            label = self.values[k]
            if isinstance(label, ElidedLabel):
                label.set_full_text(str(v))
            else:  # prose wraps; only a long unbroken run is cut
                label.setText(_break_long_words(str(v)))
                label.setToolTip(plain_tooltip(str(v)))
        verdict = info.get("verdict") or {}
        reasons = verdict.get("reasons") if isinstance(verdict, dict) else None
        self.notes.setText("\n".join(str(r) for r in reasons) if reasons else "")


__all__ = ["ConversationPanel", "ModelInfoPanel"]
