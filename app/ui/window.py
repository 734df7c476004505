"""The main window: conversations on the left, the chat in the middle, model facts on the right,
live figures at the bottom. It wires the state (`ChatState`), the worker (`EngineWorker` in its
QThread) and the views together; it never touches the engine itself.

Model files arrive by drag-and-drop anywhere on the window, File → Open, the model picker, or
the command line; each goes pre-flight → import → load in the worker. Errors become a dialog
with the one-line reason, and the window stays usable.
"""

from __future__ import annotations

import os

from PySide6.QtCore import QByteArray, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QApplication, QLabel, QMainWindow, QMessageBox, QSplitter, QVBoxLayout, QWidget,
)

from app.ui import gc_guard
from app.ui.bars import ChatInput, Composer, ModelBar, ProgressPanel
from app.ui.chat_view import EMPTY_TEXT, ChatView
from app.ui.model_files import ModelFilesMixin
from app.ui.panels import ConversationPanel, ModelInfoPanel
from app.ui.settings_dialog import SettingsDialog
from app.ui.state import ChatState
from app.ui.stats_bar import StatsBar
from app.ui.theme import app_icon
from app.ui.worker import EngineThread, EngineWorker, preload_modules
from app.ui.qt_fix import emit

TITLE = "Llambda"


class MainWindow(ModelFilesMixin, QMainWindow):
    # requests to the worker (queued into its thread)
    open_requested = Signal(str, object)
    load_requested = Signal(str, object)
    generate_requested = Signal(int, object, object)

    def __init__(self, state: ChatState | None = None, engine_factory=None, library=None):
        super().__init__()
        self.setWindowTitle(TITLE)
        self.setWindowIcon(app_icon())
        self.setObjectName("mainWindow")
        self.setAccessibleName("Llambda")
        self.setAcceptDrops(True)
        self._owns_state = state is None
        self.state = state if state is not None else ChatState()
        self._library = library
        self.model_info: dict | None = None
        self.model_busy = False
        self.generating = False
        self.editing_id: int | None = None
        self.error_dialog: QMessageBox | None = None
        self.settings_dialog: SettingsDialog | None = None
        self.errors: list[str] = []                 # every error shown, in order (tests, logs)
        self._closed = False
        self._load_note = ""
        self.preflight: dict = {}

        self._build()
        self._build_menus()

        preload_modules()
        gc_guard.acquire(self)
        self.worker = EngineWorker(engine_factory, library=self._library)
        self.thread = EngineThread(self.worker)
        w = self.worker
        self.open_requested.connect(w.on_window_open_requested)
        self.load_requested.connect(w.on_window_load_requested)
        self.generate_requested.connect(w.on_window_generate_requested)
        w.preflight_done.connect(self.on_worker_preflight_done)
        w.import_progress.connect(self.on_worker_import_progress)
        w.import_finished.connect(self.on_worker_import_finished)
        w.import_failed.connect(self.on_worker_import_failed)
        w.load_started.connect(self.on_worker_load_started)
        w.load_progress.connect(self.on_worker_load_progress)
        w.model_loaded.connect(self.on_worker_model_loaded)
        w.load_failed.connect(self.on_worker_load_failed)
        w.generation_started.connect(self.on_worker_generation_started)
        w.token_generated.connect(self.on_worker_token_generated)
        w.context_shifted.connect(self.on_worker_context_shifted)
        w.stats_updated.connect(self.stats.on_worker_stats_updated)
        w.generation_finished.connect(self.on_worker_generation_finished)
        w.generation_failed.connect(self.on_worker_generation_failed)
        self.thread.start()
        app = QApplication.instance()
        if app is not None:               # a window never closed still stops its thread cleanly
            app.aboutToQuit.connect(self.shutdown)

        self._restore_geometry()
        self.refresh_models()
        self._reopen_last_conversation()
        self.refresh_conversations()
        self.show_current()
        self._update_controls()
        self.input.setFocus()             # type at once; the window's shortcuts work from the start

    # -- layout ----------------------------------------------------------------------------------

    def _build(self) -> None:
        self.conversations = ConversationPanel()
        self.conversations.new_requested.connect(self.on_conversations_new_requested)
        self.conversations.selected.connect(self.on_conversations_selected)
        self.conversations.rename_requested.connect(self.on_conversations_rename_requested)
        self.conversations.delete_requested.connect(self.on_conversations_delete_requested)
        self.conversations.undo_requested.connect(self.on_conversations_undo_requested)
        self.conversations.search_changed.connect(self.on_conversations_search_changed)

        center = QWidget()
        center.setObjectName("center")
        col = QVBoxLayout(center)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)

        bar = ModelBar()
        self.model_picker, self.open_button = bar.picker, bar.open_button
        self.settings_button, self.info_button = bar.settings_button, bar.info_button
        self.model_picker.activated.connect(self.on_model_picker_activated)
        self.open_button.clicked.connect(self.on_open_button_clicked)
        self.settings_button.clicked.connect(self.on_settings_button_clicked)
        col.addWidget(bar)

        self.progress_panel = ProgressPanel()
        p = self.progress_panel
        self.preflight_label, self.progress_label = p.preflight_label, p.progress_label
        self.progress, self.cancel_button = p.progress, p.cancel_button
        self.cancel_button.clicked.connect(self.on_cancel_button_clicked)
        col.addWidget(self.progress_panel)

        self.chat = ChatView()
        self.chat.edit_requested.connect(self.on_chat_edit_requested)
        col.addWidget(self.chat, 1)

        self.composer = Composer()
        c = self.composer
        self.input, self.edit_banner, self.notice = c.input, c.edit_banner, c.notice
        self.send_button, self.stop_button = c.send_button, c.stop_button
        self.regenerate_button = c.regenerate_button
        self.input.send_requested.connect(self.on_input_send_requested)
        self.send_button.clicked.connect(self.on_send_button_clicked)
        self.stop_button.clicked.connect(self.on_stop_button_clicked)
        self.regenerate_button.clicked.connect(self.on_regenerate_button_clicked)
        col.addWidget(self.composer)

        self.info_panel = ModelInfoPanel()
        self.info_button.toggled.connect(self.info_panel.setVisible)

        self.splitter = QSplitter()
        self.splitter.setObjectName("splitter")
        self.splitter.addWidget(self.conversations)
        self.splitter.addWidget(center)
        self.splitter.addWidget(self.info_panel)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes([230, 760, 250])
        self.setCentralWidget(self.splitter)

        self.drop_overlay = QLabel("Drop the GGUF file to check it, add it to your library and load it", self)
        self.drop_overlay.setObjectName("dropOverlay")
        self.drop_overlay.setAccessibleName("Drop here")
        self.drop_overlay.setAlignment(Qt.AlignCenter)
        self.drop_overlay.setWordWrap(True)
        self.drop_overlay.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.drop_overlay.hide()

        self.stats = StatsBar()
        self.statusBar().addPermanentWidget(self.stats, 1)
        self.statusBar().setSizeGripEnabled(True)
        self.resize(1240, 780)

    # Slots of the bars' widgets; the actions themselves are public methods (menus, tests).
    def on_open_button_clicked(self) -> None:
        self.open_dialog()

    def on_settings_button_clicked(self) -> None:
        self.open_settings()

    def on_input_send_requested(self) -> None:
        self.send()

    def on_send_button_clicked(self) -> None:
        self.send()

    def on_stop_button_clicked(self) -> None:
        self.stop()

    def on_regenerate_button_clicked(self) -> None:
        self.regenerate()

    def _build_menus(self) -> None:
        def action(menu, text, slot, shortcut=None, name=None):
            a = QAction(text, self)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
            a.triggered.connect(slot)
            a.setStatusTip(name or text)
            menu.addAction(a)
            self.addAction(a)
            return a

        m = self.menuBar()
        file_menu = m.addMenu("&File")
        self.open_action = action(file_menu, "&Open model…", self.open_dialog, QKeySequence.Open)
        file_menu.addSeparator()
        action(file_menu, "&Quit", self.close, QKeySequence.Quit)
        chat_menu = m.addMenu("&Chat")
        self.new_action = action(chat_menu, "&New chat", self.on_conversations_new_requested, QKeySequence.New)
        self.search_action = action(chat_menu, "&Search chats", self.focus_search, QKeySequence.Find)
        self.stop_action = action(chat_menu, "S&top", self.on_escape, Qt.Key_Escape)
        self.regen_action = action(chat_menu, "&Regenerate", self.regenerate, "Ctrl+R")
        chat_menu.addSeparator()
        action(chat_menu, "Se&ttings…", self.open_settings, "Ctrl+,")
        help_menu = m.addMenu("&Help")
        action(help_menu, "&About Llambda", self.about)

    # -- helpers ---------------------------------------------------------------------------------

    def library(self):
        if self._library is None:
            from app.library import ModelLibrary

            self._library = ModelLibrary()
        return self._library

    def model_name(self) -> str | None:
        return (self.model_info or {}).get("name") or None

    def show_notice(self, text: str) -> None:
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    def show_error(self, reason: str, title: str = "Cannot open this model") -> None:
        self.errors.append(reason)
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Warning)
        box.setWindowTitle(title)
        box.setTextFormat(Qt.PlainText)
        box.setText(reason)
        box.setAccessibleName(title)
        box.setStandardButtons(QMessageBox.Ok)
        box.setWindowModality(Qt.WindowModal)
        if self.error_dialog is not None:
            self.error_dialog.close()
        self.error_dialog = box
        box.open()

    def _update_controls(self) -> None:
        loaded = self.model_info is not None and not self.model_busy
        self.send_button.setEnabled(loaded and not self.generating)
        self.stop_button.setEnabled(self.generating)
        self.regenerate_button.setEnabled(loaded and not self.generating and self.state.last_user() is not None)
        self.model_picker.setEnabled(not self.model_busy and not self.generating)
        self.open_button.setEnabled(not self.model_busy)
        self.settings_button.setEnabled(not self.model_busy)

    def _restore_geometry(self) -> None:
        g = self.state.get("window_geometry")
        if isinstance(g, str) and g:
            self.restoreGeometry(QByteArray.fromBase64(g.encode("ascii")))
        sizes = self.state.get("splitter_sizes")
        if isinstance(sizes, list) and len(sizes) == 3 and all(isinstance(s, int) for s in sizes):
            self.splitter.setSizes(sizes)

    def _reopen_last_conversation(self) -> None:
        last = self.state.get("last_conversation")
        try:
            known = {c.id for c in self.state.conversations()}
        except Exception:
            return
        if isinstance(last, int) and last in known:
            self.state.select(last)

    def engine_options(self) -> dict:
        return self.state.engine_settings()

    # -- conversations ---------------------------------------------------------------------------

    def refresh_conversations(self) -> None:
        self.conversations.show_conversations(self.state.conversations(self.conversations.search.text()),
                                              self.state.current_id)

    def show_current(self) -> None:
        """Show the current conversation, or the empty state."""
        msgs = self.state.messages()
        self.chat.show_messages(msgs)
        if msgs:
            self.chat.set_empty_text(None)
        elif self.model_info is None:
            self.chat.set_empty_text(EMPTY_TEXT)
        else:
            self.chat.set_empty_text(f"Ready: {self.model_name() or 'the model'} is loaded.\n\n"
                                     "Type a message below and press Enter.")
        r = self.state.reply
        if r is not None and r.conversation_id == self.state.current_id:
            for w in self.chat.messages:
                if w.message_id == r.message_id:
                    self.chat.streaming = w
                    w.set_status("streaming")
                    self.chat.update_reply(r.text)
        conv = self.state.current()
        self.setWindowTitle(f"{conv.title} — {TITLE}" if conv and conv.title else TITLE)
        self._update_controls()

    def on_conversations_new_requested(self) -> None:
        self.cancel_edit()
        self.state.new_conversation(self.model_name())
        self.conversations.search.clear()
        self.refresh_conversations()
        self.show_current()
        self.input.setFocus()

    def on_conversations_selected(self, conv_id: int) -> None:
        if conv_id == self.state.current_id:
            return
        self.cancel_edit()
        self.state.select(conv_id)
        self.show_current()

    def on_conversations_rename_requested(self, conv_id: int, title: str) -> None:
        self.state.rename(conv_id, title)
        self.refresh_conversations()
        self.show_current()

    def on_conversations_delete_requested(self, conv_id: int) -> None:
        if self.state.reply is not None and self.state.reply.conversation_id == conv_id:
            self.stop()
        title = self.state.store.get_conversation(conv_id).title
        self.state.delete(conv_id)
        self.conversations.show_undo(title)
        self.refresh_conversations()
        self.show_current()

    def on_conversations_undo_requested(self) -> None:
        self.state.undo_delete()
        self.refresh_conversations()
        self.show_current()

    def on_conversations_search_changed(self, _text: str) -> None:
        self.refresh_conversations()

    def focus_search(self) -> None:
        self.conversations.search.setFocus()
        self.conversations.search.selectAll()

    # -- chatting --------------------------------------------------------------------------------

    def send(self) -> None:
        text = self.input.toPlainText().strip()
        if not text or self.generating:
            return
        if self.model_info is None or self.model_busy:
            self.show_notice("Load a model first: drop a GGUF file on the window or pick one at the top.")
            return
        if self.editing_id is not None:
            self.state.truncate_from(self.editing_id)
            self.cancel_edit()
        self.input.clear()
        self.show_notice("")
        new_conv = self.state.current_id is None
        self.state.add_user_message(text, self.model_name())
        if new_conv:
            self.conversations.search.clear()
        self.refresh_conversations()
        self.show_current()
        self.start_generation()

    def start_generation(self) -> None:
        conv_id = self.state.current_id
        messages = self.state.prompt_messages(conv_id)
        reply = self.state.begin_reply(self.model_name())
        self.chat.set_empty_text(None)
        self.chat.begin_reply(reply.message_id)
        settings = {**self.state.sampling(), **{k: v for k, v in self.state.engine_settings().items()
                                                 if k == "overflow"}}
        self.generating = True
        self._update_controls()
        emit(self.generate_requested, reply.request_id, messages, settings)

    def stop(self) -> None:
        if self.generating:
            r = self.state.reply
            self.worker.cancel(r.request_id if r is not None else None)

    def on_escape(self) -> None:
        if self.generating:
            self.stop()
        elif self.editing_id is not None:
            self.cancel_edit()
            self.input.clear()
        elif self.model_busy:
            self.on_cancel_button_clicked()

    def regenerate(self) -> None:
        if self.generating or self.model_info is None or self.model_busy:
            return
        last = self.state.last_assistant()
        if last is not None:
            self.state.store.delete_message(last.id)
        if self.state.last_user() is None:
            return
        self.show_current()
        self.start_generation()

    def on_chat_edit_requested(self, message_id: int) -> None:
        if self.generating:
            return
        msg = next((m for m in self.state.messages() if m.id == message_id), None)
        if msg is None:
            return
        self.editing_id = message_id
        self.input.setPlainText(msg.content)
        self.edit_banner.show()
        self.input.setFocus()

    def cancel_edit(self) -> None:
        self.editing_id = None
        self.edit_banner.hide()

    def on_worker_generation_started(self, request_id: int) -> None:
        self.stats.on_worker_stats_updated({"gen_tok_s": None, "prompt_tok_s": None, "ttft_s": None})

    def on_worker_token_generated(self, request_id: int, text: str) -> None:
        r = self.state.append_reply(request_id, text)
        if r is not None and r.conversation_id == self.state.current_id and self.chat.streaming is not None:
            self.chat.update_reply(r.text)

    def on_worker_context_shifted(self, request_id: int, dropped: int) -> None:
        self.state.mark_shift(request_id, dropped)
        r = self.state.reply
        if r is not None and r.conversation_id == self.state.current_id:
            self.chat.mark_context_shift(dropped)

    def _finished(self, request_id: int, stats: dict, error: str | None) -> None:
        r = self.state.finish_reply(request_id, stats, error)
        self.generating = False
        if r is not None and r.conversation_id == self.state.current_id:
            status = "error" if error else ("interrupted" if stats.get("stopped") else "complete")
            self.chat.finish_reply(r.text, status)
        self.refresh_conversations()
        self._update_controls()

    def on_worker_generation_finished(self, request_id: int, stats: dict) -> None:
        self._finished(request_id, stats, None)

    def on_worker_generation_failed(self, request_id: int, reason: str) -> None:
        self.errors.append(reason)
        self._finished(request_id, {}, reason)
        self.show_notice(f"The reply failed: {reason}")

    # -- settings --------------------------------------------------------------------------------

    def open_settings(self) -> SettingsDialog:
        from app.engine.threads import load_measured

        conv = self.state.current()
        dlg = SettingsDialog(conv.system_prompt if conv else (self.state.get("system_prompt_default", "") or ""),
                             self.state.sampling(), self.state.engine_settings(), os.cpu_count() or 1, self,
                             measured=load_measured())
        dlg.accepted.connect(self.on_settings_accepted)
        self.settings_dialog = dlg
        dlg.open()
        return dlg

    def on_settings_accepted(self) -> None:
        dlg = self.settings_dialog
        if dlg is None:
            return
        system, sampling, engine = dlg.values()
        before = self.state.engine_settings()
        if self.state.current_id is None:
            self.state.put("system_prompt_default", system)
        self.state.save_settings(system, sampling, engine)
        reload_needed = any(before.get(k) != engine.get(k) for k in ("n_ctx", "threads"))
        if reload_needed and self.model_info is not None and self.worker.loaded_path and not self.generating:
            self.model_busy = True
            self._update_controls()
            emit(self.load_requested, self.worker.loaded_path, self.engine_options())

    def about(self) -> None:
        box = QMessageBox(self)
        box.setWindowTitle("About Llambda")
        box.setTextFormat(Qt.PlainText)
        box.setText("Llambda: chat with language models on your own CPU, offline.\n"
                    "Its inference engine is its own: C kernels driven from Python.")
        box.open()

    # -- closing ---------------------------------------------------------------------------------

    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Save the geometry, stop the worker thread, keep the reply in flight; once."""
        if not self._closed:
            self._closed = True
            try:
                self.state.put("window_geometry", bytes(self.saveGeometry().toBase64()).decode("ascii"))
                self.state.put("splitter_sizes", [int(s) for s in self.splitter.sizes()])
                self.state.put("last_conversation", self.state.current_id)
            except Exception:
                pass
            self.chat._render_timer.stop()
            self.stats.timer.stop()
            self.thread.stop()
            r = self.state.reply
            if r is not None:
                try:
                    self.state.finish_reply(r.request_id, {"stopped": True})
                except Exception:
                    pass
            if self._owns_state:
                self.state.close()
            gc_guard.release()


__all__ = ["MainWindow", "ChatInput", "TITLE"]
