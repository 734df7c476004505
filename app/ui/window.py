"""The main window: conversations on the left, the chat in the middle, model facts on the right,
live figures at the bottom. It wires the state (`ChatState`), the worker (`EngineWorker` in its
QThread) and the views together; it never touches the engine itself.

Model files arrive by drag-and-drop anywhere on the window, File → Open, the model picker, or
the command line; each goes pre-flight → import → load in the worker (`ModelFilesMixin`,
app/ui/model_files.py). Errors become a dialog with the one-line reason, and the window stays
usable. File → Serve on localhost and the serve bar are `LocalServer` (app/ui/local_server.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable

from PySide6.QtCore import QByteArray, Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app import __version__, logs
from app.chats.attachments import ATTACH_SUFFIXES, message_with_attachments, read_attachment, share_that_fits
from app.chats.export import export_conversation, export_file_name, import_json
from app.errors import StoreError
from app.paths import write_problem
from app.units import format_count
from app.ui import gc_guard
from app.ui.about import add_help_actions, model_identity_of, show_about, show_model_identity
from app.ui.advice import advice_for
from app.ui.bars import ChatInput, Composer, ModelBar, ProgressPanel, StartupBanner
from app.ui.chat_view import EMPTY_TEXT, ChatView
from app.ui.error_dialog import ErrorDialog
from app.ui.get_models import FirstModelsPanel, GetModelsPage
from app.ui.local_server import LocalServer
from app.ui.model_files import ModelFilesMixin
from app.ui.panels import ConversationPanel, ModelInfoPanel
from app.ui.settings_dialog import SettingsDialog
from app.ui.state import ChatState, not_saved_line, reply_timings
from app.ui.stats_bar import StatsBar, prompt_progress_text
from app.ui.system_prompt import SystemPromptBar
from app.ui.theme import app_icon, set_theme_choice
from app.ui.worker import EngineFactory, EngineThread, EngineWorker, preload_modules
from app.ui.qt_fix import application, emit

if TYPE_CHECKING:
    from PySide6.QtCore import QObject, QTimer
    from PySide6.QtWidgets import QMenu

    from app.chats.store import Message
    from app.engine.generate import ContextShifted, Finished
    from app.library import ModelLibrary
    from app.ui.crash import CrashHandler

TITLE = "Llambda"


class MainWindow(ModelFilesMixin, QMainWindow):
    # requests to the worker (queued into its thread)
    open_requested = Signal(str, object)
    load_requested = Signal(str, object)
    generate_requested = Signal(int, object, object)
    starter_requested = Signal(object)
    count_requested = Signal(int, str)
    conversation_switched = Signal()  # the last conversation answered keeps its KV state
    kv_budget_changed = Signal(object)  # MiB of disk for saved KV states (settings)

    # set by app.ui.main.run_window on the window it runs
    crash_handler: CrashHandler
    _file_open_forwarder: QObject  # the macOS FileOpen events' filter, kept as long as the window
    _signal_timer: QTimer  # lets Python's signal handlers run inside Qt's loop

    def __init__(
        self,
        state: ChatState | None = None,
        engine_factory: EngineFactory | None = None,
        library: ModelLibrary | None = None,
    ):
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
        self._shown_id: int | None = None  # the conversation the chat column holds
        self.editing_id: int | None = None
        self.error_dialog: ErrorDialog | None = None
        self.settings_dialog: SettingsDialog | None = None
        self.errors: list[str] = []  # every error shown, in order (tests, logs)
        self.attachments: list[dict] = []  # {"id", "attachment", "tokens"} for the next message
        self._next_attachment = 1
        self._closed = False
        self.get_models_page: GetModelsPage | None = None  # made on first use, kept
        self._load_note = ""
        self.preflight: dict = {}

        self._build()
        self._build_menus()

        preload_modules()
        gc_guard.acquire(self)
        self.worker = EngineWorker(engine_factory, library=self._library)
        self.engine_thread = EngineThread(self.worker)  # not `thread`: that is QObject.thread()
        w = self.worker
        self.connect_model_files(w)  # open, import, load, the starter model: app/ui/model_files.py
        self.generate_requested.connect(w.on_window_generate_requested)
        self.count_requested.connect(w.on_window_count_requested)
        self.conversation_switched.connect(w.on_window_conversation_switched)
        self.kv_budget_changed.connect(w.on_window_kv_budget_changed)
        w.tokens_counted.connect(self.on_worker_tokens_counted)
        w.generation_started.connect(self.on_worker_generation_started)
        w.prompt_progress.connect(self.on_worker_prompt_progress)
        w.token_generated.connect(self.on_worker_token_generated)
        w.context_shifted.connect(self.on_worker_context_shifted)
        w.stats_updated.connect(self.stats.on_worker_stats_updated)
        w.generation_finished.connect(self.on_worker_generation_finished)
        w.generation_failed.connect(self.on_worker_generation_failed)
        self.local_server = LocalServer(self, w, self.serve_action)  # File > Serve on localhost
        self.serve_bar = self.local_server.bar
        self.engine_thread.start()
        app = application()
        if app is not None:  # a window never closed still stops its thread cleanly
            app.aboutToQuit.connect(self.shutdown)

        self._restore_geometry()
        if (self.state.get("theme", "system") or "system") != "system":
            self.apply_theme_choice()
        self.refresh_models()
        self.startup_problems = self._startup_problems()
        self.startup_banner.show_lines(self.startup_problems)
        self._reopen_last_conversation()
        self.refresh_conversations()
        self.show_current()
        self._update_controls()
        self.input.setFocus()  # type at once; the window's shortcuts work from the start

    # -- layout ----------------------------------------------------------------------------------

    def _build(self) -> None:
        self.conversations = ConversationPanel()
        self.conversations.new_requested.connect(self.on_conversations_new_requested)
        self.conversations.selected.connect(self.on_conversations_selected)
        self.conversations.rename_requested.connect(self.on_conversations_rename_requested)
        self.conversations.delete_requested.connect(self.on_conversations_delete_requested)
        self.conversations.undo_requested.connect(self.on_conversations_undo_requested)
        self.conversations.search_changed.connect(self.on_conversations_search_changed)
        self.conversations.export_requested.connect(self.on_conversations_export_requested)

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

        self.startup_banner = StartupBanner()
        col.addWidget(self.startup_banner)

        self.progress_panel = ProgressPanel()
        p = self.progress_panel
        self.preflight_label, self.progress_label = p.preflight_label, p.progress_label
        self.progress, self.cancel_button = p.progress, p.cancel_button
        self.cancel_button.clicked.connect(self.on_cancel_button_clicked)
        col.addWidget(self.progress_panel)

        self.system_bar = SystemPromptBar()
        self.system_bar.applied.connect(self.on_system_bar_applied)
        self.system_bar.preset_saved.connect(self.on_system_bar_preset_saved)
        self.system_bar.default_requested.connect(self.on_system_bar_default_requested)
        col.addWidget(self.system_bar)

        self.chat = ChatView()
        self.chat.edit_requested.connect(self.on_chat_edit_requested)
        self.chat.continue_requested.connect(self.on_chat_continue_requested)
        self.chat.version_requested.connect(self.on_chat_version_requested)
        self.chat.starter_button.clicked.connect(self.on_starter_button_clicked)
        self.first_models = FirstModelsPanel()
        self.first_models.download_requested.connect(self.on_first_models_download_requested)
        self.first_models.search_requested.connect(self.on_first_models_search_requested)
        self.chat.starter_column.addWidget(self.first_models)
        col.addWidget(self.chat, 1)

        self.composer = Composer()
        c = self.composer
        self.input, self.edit_banner, self.notice = c.input, c.edit_banner, c.notice
        self.send_button, self.stop_button = c.send_button, c.stop_button
        self.regenerate_button = c.regenerate_button
        self.attach_button = c.attach_button
        self.attach_button.clicked.connect(self.on_attach_button_clicked)
        self.input.send_requested.connect(self.on_input_send_requested)
        self.send_button.clicked.connect(self.on_send_button_clicked)
        self.stop_button.clicked.connect(self.on_stop_button_clicked)
        self.regenerate_button.clicked.connect(self.on_regenerate_button_clicked)
        col.addWidget(self.composer)

        self.info_panel = ModelInfoPanel()
        self.info_wanted = True  # the Model info button's choice; narrow windows fold it
        self.narrow = False
        self.info_button.toggled.connect(self.on_info_button_toggled)

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
        self.drop_overlay.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.drop_overlay.setWordWrap(True)
        self.drop_overlay.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.drop_overlay.hide()

        self.stats = StatsBar()
        self.statusBar().addPermanentWidget(self.stats, 1)
        self.statusBar().setSizeGripEnabled(True)
        # Set, not computed from the panels: the model panel folds away below
        # COLLAPSE_INFO_BELOW, so its width must not keep the window from getting narrower.
        self.setMinimumSize(600, 440)
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

    COLLAPSE_INFO_BELOW = 1000  # px: below this the model panel folds away (Model info shows it)

    def on_info_button_toggled(self, checked: bool) -> None:
        self.info_wanted = checked
        self.info_panel.setVisible(checked)

    def resizeEvent(self, event: QResizeEvent) -> None:
        narrow = event.size().width() < self.COLLAPSE_INFO_BELOW
        if narrow != self.narrow:
            self.narrow = narrow
            shown = self.info_wanted and not narrow
            self.info_button.blockSignals(True)
            self.info_button.setChecked(shown)
            self.info_button.blockSignals(False)
            self.info_panel.setVisible(shown)
            self.conversations.setMaximumWidth(200 if narrow else 320)
        super().resizeEvent(event)

    def _build_menus(self) -> None:
        def action(
            menu: QMenu,
            text: str,
            slot: Callable[..., object] | None,
            shortcut: str | QKeySequence.StandardKey | Qt.Key | None = None,
            name: str | None = None,
        ) -> QAction:
            a = QAction(text, self)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
            if slot is not None:
                a.triggered.connect(slot)
            a.setStatusTip(name or text)
            menu.addAction(a)
            self.addAction(a)
            return a

        m = self.menuBar()
        file_menu = m.addMenu("&File")
        self.open_action = action(file_menu, "&Open model…", self.open_dialog, QKeySequence.StandardKey.Open)
        self.models_action = action(file_menu, "&Manage models…", self.open_models, "Ctrl+M")
        self.get_models_action = action(
            file_menu,
            "&Get models…",
            self.open_get_models,
            "Ctrl+G",
            "Search the Hugging Face Hub and download a model",
        )
        file_menu.addSeparator()
        self.export_action = action(file_menu, "&Export chat…", self.export_dialog, "Ctrl+Shift+E")
        self.import_action = action(file_menu, "&Import chat…", self.import_dialog)
        file_menu.addSeparator()
        self.serve_action = action(  # checkable, and wired to the serve bar: app/ui/local_server.py
            file_menu,
            "&Serve on localhost (OpenAI API)",
            None,
            name="Let other programs on this computer use the open model",
        )
        file_menu.addSeparator()
        action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        chat_menu = m.addMenu("&Chat")
        self.new_action = action(
            chat_menu, "&New chat", self.on_conversations_new_requested, QKeySequence.StandardKey.New
        )
        self.search_action = action(chat_menu, "&Search chats", self.focus_search, QKeySequence.StandardKey.Find)
        self.stop_action = action(chat_menu, "S&top", self.on_escape, Qt.Key.Key_Escape)
        self.regen_action = action(chat_menu, "&Regenerate", self.regenerate, "Ctrl+R")
        chat_menu.addSeparator()
        action(chat_menu, "Se&ttings…", self.open_settings, "Ctrl+,")
        help_menu = m.addMenu("&Help")
        add_help_actions(self, help_menu)

    # -- helpers ---------------------------------------------------------------------------------

    def library(self) -> ModelLibrary:
        if self._library is None:
            from app.library import ModelLibrary  # lazy: numpy; the window shows first (see PRELOAD)

            self._library = ModelLibrary()
        return self._library

    def model_name(self) -> str | None:
        return (self.model_info or {}).get("name") or None

    def show_notice(self, text: str) -> None:
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    def show_error(self, reason: str, title: str = "Cannot open this model") -> None:
        """The reason, what to do about it, and Details/Copy (app.ui.error_dialog)."""
        self.errors.append(reason)
        facts = [f"Llambda {__version__}"]
        try:
            from app.diagnostics import kernels_description  # lazy: only an error needs it (start-up)

            facts.append(f"kernels: {kernels_description()}")
        except Exception:
            pass
        if self.preflight.get("path"):
            facts.append(f"file: {self.preflight['path']}")
        box = ErrorDialog(title, reason, "\n".join(facts), self)
        box.setWindowModality(Qt.WindowModality.WindowModal)
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

    def _startup_problems(self) -> list[str]:
        """What Llambda cannot do this session, one line each, for the start-up banner: the
        conversation store's notice (a folder that cannot be written, a database set aside,
        app.chats.recovery), a logs folder that cannot be written (app.logs), a models folder
        that cannot be written."""
        lines = []
        notice = getattr(self.state.store, "notice", None)
        if notice:
            lines.append(notice)
        if logs.problem():
            lines.append(logs.problem())
        folder = getattr(self.library(), "folder", None)
        why = write_problem(folder) if folder is not None else None
        if why is not None:
            lines.append(
                f"Models cannot be added to the library: the models folder {folder} cannot be written ({why})."
            )
        return lines

    def engine_options(self) -> dict:
        """The engine's settings, and how a model file is added ("import_mode": copy or in place)."""
        return {
            **self.state.engine_settings(),
            "keep_in_place": (self.state.get("import_mode", "copy") or "copy") == "in_place",
        }

    # -- conversations ---------------------------------------------------------------------------

    def refresh_conversations(self) -> None:
        self.conversations.show_conversations(
            self.state.conversations(self.conversations.search.text()), self.state.current_id
        )

    def show_current(self) -> None:
        """Show the current conversation, or the empty state."""
        msgs = self.state.messages()
        self.chat.show_messages(msgs)
        self._shown_id = self.state.current_id
        if msgs:
            self.chat.set_empty_text(None)
        elif self.model_info is None:
            self.chat.set_empty_text(EMPTY_TEXT)
            self.chat.starter.setVisible(self._library_is_empty())
        else:
            self.chat.set_empty_text(
                f"Ready: {self.model_name() or 'the model'} is loaded.\n\nType a message below and press Enter."
            )
        r = self.state.reply
        if r is not None and r.conversation_id == self.state.current_id:
            for w in self.chat.messages:
                if w.message_id == r.message_id:
                    self.chat.streaming = w
                    w.set_status("streaming")
                    self.chat.update_reply(r.text)
        conv = self.state.current()
        self.setWindowTitle(f"{conv.title} — {TITLE}" if conv and conv.title else TITLE)
        self.system_bar.set_presets(self.state.get("system_prompt_presets", {}) or {})
        self.system_bar.show_prompt(conv.system_prompt if conv else (self.state.get("system_prompt_default", "") or ""))
        if r is None or r.conversation_id != self.state.current_id:
            self.show_chat_figures(msgs)
        self._update_controls()

    def show_chat_figures(self, msgs: list[Message] | None = None) -> None:
        """The status bar shows the chat on screen: the figures of its last reply made by the
        model loaded now, the empty context of a new chat, or nothing known ("–")."""
        if self.model_info is None:
            self.stats.show_chat(None, None)
            return
        msgs = self.state.messages() if msgs is None else msgs
        n_ctx = self.model_info.get("n_ctx")
        last = next((m for m in reversed(msgs) if m.role == "assistant" and m.timings), None)
        if not msgs:
            self.stats.show_chat({"n_ctx_used": 0}, n_ctx)
        elif last is not None and last.model == self.model_name():
            t = dict(last.timings)
            if "n_ctx_used" not in t and last.prompt_tokens is not None:
                t["n_ctx_used"] = (last.prompt_tokens or 0) + (last.completion_tokens or 0)
            self.stats.show_chat(t, n_ctx)
        else:
            self.stats.show_chat(None, n_ctx)

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
        emit(self.conversation_switched)

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

    def on_conversations_export_requested(self, conv_id: int) -> None:
        self.on_conversations_selected(conv_id)
        self.export_dialog()

    def _library_is_empty(self) -> bool:
        try:
            return not self.library().list()
        except Exception:
            return False

    def on_conversations_search_changed(self, _text: str) -> None:
        self.refresh_conversations()

    def focus_search(self) -> None:
        self.conversations.search.setFocus()
        self.conversations.search.selectAll()

    # -- chatting --------------------------------------------------------------------------------

    def send(self) -> None:
        text = self.input.toPlainText().strip()
        if (not text and not self.attachments) or self.generating:
            return
        if self.model_info is None or self.model_busy:
            self.show_notice("Load a model first: drop a GGUF file on the window or pick one at the top.")
            return
        if self.attachments:
            too_big = self.attachment_problem()
            if too_big:
                self.show_notice(too_big)
                return
            text = message_with_attachments(text, [a["attachment"] for a in self.attachments])
        edited = self.editing_id is not None
        shown = self.state.current_id is not None and self._shown_id == self.state.current_id
        new_conv = self.state.current_id is None
        try:
            if self.editing_id is not None:  # edited
                self.state.truncate_from(self.editing_id)
            msg_id = self.state.add_user_message(text, self.model_name())
        except StoreError as e:  # a full disk: the text stays in the box to send again
            self.show_notice(
                not_saved_line("Your message", e) + " It is still in the box: send it again once there is room."
            )
            return
        if edited:
            self.cancel_edit()
        if self.attachments:
            self.clear_attachments()
        self.input.clear()
        self.show_notice("")
        if new_conv:
            self.conversations.search.clear()
        self.refresh_conversations()
        if shown and not edited:
            self.chat.append_message(self.state.store.get_message(msg_id))
        else:
            self.show_current()
        self.start_generation()

    def start_generation(self) -> None:
        messages = self.state.prompt_messages(self.state.open_id())
        try:
            reply = self.state.begin_reply(self.model_name(), model_identity_of(self.model_info))
        except StoreError as e:
            self.show_notice(not_saved_line("The reply", e) + " Press Regenerate once there is room.")
            return
        self.chat.set_empty_text(None)
        self.chat.begin_reply(reply.message_id)
        settings = {
            **self.state.sampling(),
            **{k: v for k, v in self.state.engine_settings().items() if k == "overflow"},
        }
        self.generating = True
        self._update_controls()
        emit(self.generate_requested, reply.request_id, messages, settings)

    def on_chat_continue_requested(self, message_id: int) -> None:
        self.continue_reply(message_id)

    def continue_reply(self, message_id: int | None = None) -> None:
        """Go on with the last reply where the token limit stopped it, in the same message."""
        if self.generating or self.model_info is None or self.model_busy:
            return
        last = self.state.last_assistant()
        if last is None or (message_id is not None and last.id != message_id):
            return
        messages = self.state.prompt_messages(self.state.open_id())
        reply = self.state.continue_reply(last.id)
        self.chat.resume_reply(last.id)
        settings = {**self.state.sampling(), "continue": True}
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
        """A new reply to the last message; the earlier ones are kept as versions (‹ 1/2 ›)."""
        if self.generating or self.model_info is None or self.model_busy:
            return
        try:
            versions = self.state.take_for_regenerate()
        except StoreError as e:
            self.show_notice(not_saved_line("The new reply", e) + " Press Regenerate once there is room.")
            return
        if self.state.last_user() is None:
            return
        self.show_current()
        self.start_generation()
        if self.state.reply is not None:
            self.state.reply.versions = versions

    def on_chat_version_requested(self, message_id: int, index: int) -> None:
        if self.generating:
            return
        self.state.show_version(message_id, index)
        self.show_current()

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
        if self._closed:
            return
        self.stats.on_worker_stats_updated(
            {"gen_tok_s": None, "prompt_tok_s": None, "ttft_s": None, "prompt_reused": None, "prompt": None}
        )

    def on_worker_prompt_progress(self, request_id: int, figures: dict) -> None:
        r = self.state.reply
        if self._closed or r is None or r.request_id != request_id:
            return
        if r.conversation_id == self.state.current_id:
            self.chat.show_prompt_progress(prompt_progress_text(figures))

    def on_worker_token_generated(self, request_id: int, pieces: tuple) -> None:
        """A batch of the reply's `TextPiece`s."""
        if self._closed:
            return
        r = self.state.append_reply(request_id, "".join(p.text for p in pieces))
        if r is not None and r.conversation_id == self.state.current_id and self.chat.streaming is not None:
            self.chat.update_reply(r.text)
        self._show_save_problem()

    def on_worker_context_shifted(self, request_id: int, shift: ContextShifted) -> None:
        """`shift`: the engine's ContextShifted."""
        if self._closed:
            return
        self.state.mark_shift(request_id, shift.dropped)
        r = self.state.reply
        if r is not None and r.conversation_id == self.state.current_id:
            self.chat.mark_context_shift(shift.dropped)

    def _finished(self, request_id: int, stats: dict, error: str | None) -> None:
        if self._closed:  # the reply was saved as stopped when the window closed
            return
        r = self.state.finish_reply(request_id, stats, error)
        self.generating = False
        if r is not None and r.versions and r.conversation_id == self.state.current_id:
            self.chat.finish_reply(
                r.text, "error" if error else ("interrupted" if stats.get("stopped") else "complete")
            )
            self.show_current()  # the reply now shows its versions
            self.refresh_conversations()
            self._update_controls()
            self._show_save_problem()
            return
        if r is not None and r.conversation_id == self.state.current_id:
            status = "error" if error else ("interrupted" if stats.get("stopped") else "complete")
            self.chat.finish_reply(r.text, status, at_limit=stats.get("stop_reason") == "length")
            show_model_identity(self.chat, self.state.store, r.message_id)
        self.refresh_conversations()
        self._update_controls()
        self._show_save_problem()

    def _show_save_problem(self) -> None:
        """A reply that could not be saved (a full disk) stays on screen; the notice says so."""
        problem = self.state.take_save_problem()
        if problem:
            self.show_notice(problem)

    def on_worker_generation_finished(self, request_id: int, finished: Finished | None, figures: dict) -> None:
        """`finished`: the engine's Finished (or None); `figures`: the worker's (see
        EngineWorker.generation_finished)."""
        stats = reply_timings(finished, figures)
        note, status = stats.pop("template_note", None), stats.pop("template_status", None)
        if not self._closed:
            self.stats.on_worker_stats_updated(stats)  # the engine's final figures
        self._finished(request_id, stats, None)
        if note and not self._closed and self.model_info is not None:
            # the model's chat template failed on this conversation: the fallback took over
            self.model_info = {**self.model_info, "template_status": status, "template_note": note}
            self.info_panel.show_info(self.model_info)
            self.show_notice(note)

    def on_worker_generation_failed(self, request_id: int, reason: str) -> None:
        if self._closed:
            return
        self.errors.append(reason)
        self._finished(request_id, {}, reason)
        self.show_notice(" ".join(x for x in (f"The reply failed: {reason}", advice_for(reason)) if x))

    # -- attachments -----------------------------------------------------------------------------

    def on_attach_button_clicked(self) -> None:
        patterns = " ".join(f"*.{s}" for s in sorted(ATTACH_SUFFIXES))
        paths, _ = QFileDialog.getOpenFileNames(
            self,
            "Attach files",
            os.path.expanduser("~"),
            f"Text, Markdown, source code, PDF ({patterns});;All files (*)",
        )
        for path in paths:
            self.attach_file(path)

    def attach_file(self, path: str) -> bool:
        """Read a file to send with the next message; its tokens are counted by the model."""
        try:
            a = read_attachment(path)
        except Exception as e:
            self.show_notice(str(e))
            return False
        item = {"id": self._next_attachment, "attachment": a, "tokens": None, "counted": False}
        self._next_attachment += 1
        self.attachments.append(item)
        emit(self.count_requested, item["id"], a.text)
        self.show_attachments()
        self.input.setFocus()
        return True

    def on_worker_tokens_counted(self, attachment_id: int, n: int | None) -> None:
        for item in self.attachments:
            if item["id"] == attachment_id:
                item["tokens"], item["counted"] = n, True
        self.show_attachments()

    def free_tokens(self) -> int | None:
        """Tokens of the context left for attachments: the context, less what the chat on screen
        already uses, less room for the reply."""
        if self.model_info is None:
            return None
        n_ctx = int(self.model_info.get("n_ctx") or 0)
        used = self.stats.figures.get("n_ctx_used") or 0
        reply = min(int(self.state.sampling().get("max_tokens", 512)), n_ctx // 4)
        return max(0, n_ctx - int(used) - reply - 64)

    def attachment_problem(self) -> str:
        """ "" when the attachments fit; else what is too large and what would fit."""
        free = self.free_tokens()
        total = sum(item["tokens"] or 0 for item in self.attachments)
        if free is None or total <= free:
            return ""
        big = max(self.attachments, key=lambda item: item["tokens"] or 0)
        share = share_that_fits(big["tokens"] or 0, max(0, free - (total - (big["tokens"] or 0))))
        return (
            f"Too large for the context: the attachments take {total:,} tokens and {free:,} are free "
            f"({big['attachment'].name}: about the first {share:.0%} would fit). Remove it or attach a "
            "part, start a new chat, or raise the context length in Settings."
        )

    def show_attachments(self) -> None:
        box = self.composer.attachments_row
        while box.count():
            taken = box.takeAt(0)
            w = taken.widget() if taken is not None else None
            if w is not None:
                w.hide()
                w.deleteLater()
        free = self.free_tokens()
        used = 0
        for item in self.attachments:
            a, n = item["attachment"], item["tokens"]
            chip = QWidget()
            row = QHBoxLayout(chip)
            row.setContentsMargins(0, 0, 0, 0)
            what = (
                f"{format_count(a.pages, 'page')} of PDF" if a.kind == "pdf" else format_count(len(a.text), "character")
            )
            if n is None:
                fit = (
                    "tokens counted when a model is loaded"
                    if self.model_info is None or item["counted"] and self.worker.loaded_path is None
                    else "token count unavailable"
                    if item["counted"]
                    else "counting tokens…"
                )
            else:
                used += n
                if free is None or used <= free:
                    fit = f"{format_count(n, 'token')}, fits"
                else:
                    fit = (
                        f"{format_count(n, 'token')}: too large, {max(0, free - used + n):,} free "
                        f"(about {share_that_fits(n, max(0, free - used + n)):.0%} of it would fit)"
                    )
            label = QLabel(f"Attached: {a.name} · {what} · {fit}")
            label.setObjectName("attachmentChip")
            label.setTextFormat(Qt.TextFormat.PlainText)
            label.setToolTip(a.name)
            row.addWidget(label, 1)
            remove = QPushButton("Remove")
            remove.setObjectName("messageAction")
            remove.setAccessibleName(f"Remove the attachment {a.name}")
            remove.clicked.connect(lambda _=False, i=item["id"]: self.remove_attachment(i))
            row.addWidget(remove)
            box.addWidget(chip)
            item["label"] = label
        self.composer.attachments.setVisible(bool(self.attachments))
        self._update_controls()

    def remove_attachment(self, attachment_id: int) -> None:
        self.attachments = [item for item in self.attachments if item["id"] != attachment_id]
        self.show_attachments()

    def clear_attachments(self) -> None:
        self.attachments = []
        self.show_attachments()

    # -- system prompt ---------------------------------------------------------------------------

    def on_system_bar_applied(self, text: str) -> None:
        """The chat on screen reads `text` first from its next reply on (no chat yet: new chats do)."""
        if self.state.current_id is None:
            self.state.put("system_prompt_default", text)
        else:
            self.state.store.update_conversation(self.state.current_id, system_prompt=text)
        self.show_current()

    def on_system_bar_preset_saved(self, name: str, text: str) -> None:
        presets = dict(self.state.get("system_prompt_presets", {}) or {})
        presets[name] = text
        self.state.put("system_prompt_presets", presets)
        self.system_bar.set_presets(presets)
        self.show_notice(f"Saved the preset “{name}”.")

    def on_system_bar_default_requested(self, text: str) -> None:
        self.state.put("system_prompt_default", text)
        self.show_notice("New chats will start with this system prompt.")

    # -- export and import -----------------------------------------------------------------------

    def export_dialog(self) -> None:
        if self.state.current_id is None:
            self.show_notice("Open a chat to export it.")
            return
        name = export_file_name(self.state.store, self.state.current_id, "md")
        path, chosen = QFileDialog.getSaveFileName(
            self,
            "Export chat",
            os.path.join(os.path.expanduser("~"), name),
            "Markdown (*.md);;JSON, for importing again (*.json)",
        )
        if path:
            self.export_current(path, "json" if chosen.startswith("JSON") or path.endswith(".json") else "md")

    def export_current(self, path: str, fmt: str | None = None) -> str | None:
        """Write the chat on screen to `path` as Markdown or JSON (from the suffix by default)."""
        if self.state.current_id is None:
            return None
        fmt = fmt or ("json" if str(path).lower().endswith(".json") else "md")
        if fmt == "md" and not str(path).lower().endswith(".md"):
            path = f"{path}.md"
        elif fmt == "json" and not str(path).lower().endswith(".json"):
            path = f"{path}.json"
        try:
            out = export_conversation(self.state.store, self.state.current_id, path, fmt)
        except Exception as e:
            self.show_error(str(e), "Cannot export this chat")
            return None
        self.show_notice(f"Exported to {out}")
        return str(out)

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Import a chat", os.path.expanduser("~"), "Llambda chat exports (*.json)"
        )
        if path:
            self.import_chat(path)

    def import_chat(self, path: str) -> int | None:
        try:
            conv_id = import_json(self.state.store, path)
        except Exception as e:
            self.show_error(str(e), "Cannot import this chat")
            return None
        self.cancel_edit()
        self.state.select(conv_id)
        self.conversations.search.clear()
        self.refresh_conversations()
        self.show_current()
        return conv_id

    # -- settings --------------------------------------------------------------------------------

    def open_settings(self) -> SettingsDialog:
        from app.engine.threads import load_measured  # lazy: the engine (numpy); see PRELOAD

        conv = self.state.current()
        dlg = SettingsDialog(
            conv.system_prompt if conv else (self.state.get("system_prompt_default", "") or ""),
            self.state.sampling(),
            self.state.engine_settings(),
            os.cpu_count() or 1,
            self,
            theme=self.state.get("theme", "system") or "system",
            measured=load_measured(),
            drafts=(self.model_info or {}).get("drafts", {}),
        )
        dlg.accepted.connect(self.on_settings_accepted)
        self.settings_dialog = dlg
        dlg.open()
        return dlg

    def on_settings_accepted(self) -> None:
        dlg = self.settings_dialog
        if dlg is None:
            return
        system, sampling, engine = dlg.values()
        self.state.put("theme", dlg.theme_choice())
        self.apply_theme_choice()
        before = self.state.engine_settings()
        if self.state.current_id is None:
            self.state.put("system_prompt_default", system)
        self.state.save_settings(system, sampling, engine)
        reload_needed = any(
            before.get(k) != engine.get(k) for k in ("n_ctx", "threads", "kv_type", "speculation", "draft", "draft_max")
        )
        if before.get("kv_budget_mb") != engine.get("kv_budget_mb"):
            emit(self.kv_budget_changed, int(engine["kv_budget_mb"]))
        if reload_needed and self.model_info is not None and self.worker.loaded_path and not self.generating:
            self.model_busy = True
            self._update_controls()
            emit(self.load_requested, self.worker.loaded_path, self.engine_options())

    def apply_theme_choice(self) -> str | None:
        app = application()
        if app is None:
            return None
        return set_theme_choice(app, self.state.get("theme", "system") or "system")

    def about(self) -> QMessageBox:
        return show_about(self)

    # -- closing ---------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Save the geometry, stop the worker thread, keep the reply in flight; once."""
        if not self._closed:
            self._closed = True
            try:
                b64 = self.saveGeometry().toBase64()
                geometry = bytes(b64)  # type: ignore[call-overload]  # PySide6's stub: QByteArray has no buffer
                self.state.put("window_geometry", geometry.decode("ascii"))
                self.state.put("splitter_sizes", [int(s) for s in self.splitter.sizes()])
                self.state.put("last_conversation", self.state.current_id)
            except Exception:
                pass
            self.chat._render_timer.stop()
            self.stats.timer.stop()
            self.local_server.stop()
            if self.get_models_page is not None:
                self.get_models_page.shutdown()
            self.engine_thread.stop()
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
