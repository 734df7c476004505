"""Models → Manage models…: every model of the library with what people ask about it (name,
architecture, quantization, size on disk, context it was trained for, last use, where the file
is, whether Llambda holds a copy or uses it in place), and what they do with it: Load, Remove
(asks first; an original used in place is never deleted), Show in the file manager. Also the
choice made when a model file is opened (copy it into the library, or use it where it is), and
the models other apps (LM Studio, GPT4All, Jan, the Hugging Face cache) already have on disk.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.ui.qt_fix import emit
from app.units import format_last_used, format_size

if TYPE_CHECKING:
    from pathlib import Path

    from app.library import ModelLibrary
    from app.library.elsewhere import FoundModel
    from app.library.index import ModelEntry

STORAGE = {"copy": "copy in the library", "link": "linked in place", "reference": "used in place"}
IMPORT_MODES = (
    ("copy", "Copy it into the library (the original can then be moved or deleted)"),
    ("in_place", "Use it where it is (no copy; keep the file there)"),
)
COLUMNS = ("Name", "Architecture", "Quantization", "Size", "Context", "Last used", "Kept as", "File")


def trained_context(path: str | os.PathLike) -> str:
    try:
        from app.gguf import open_gguf  # lazy: numpy; the window loads this module at start

        with open_gguf(path) as f:
            arch = f.metadata.string("general.architecture", "")
            n = f.metadata.get(f"{arch}.context_length")
            return f"{int(n):,}" if n is not None else "–"
    except Exception:
        return "–"


class ModelsDialog(QDialog):
    load_requested = Signal(str)  # sha256
    open_in_place_requested = Signal(str)  # a file found in another app's folder
    import_mode_changed = Signal(str)

    def __init__(self, library: ModelLibrary, import_mode: str = "copy", parent: QWidget | None = None):
        super().__init__(parent)
        self.library = library
        self.setWindowTitle("Models")
        self.setObjectName("modelsDialog")
        self.setAccessibleName("Models")
        self.confirm = self._confirm  # tests replace these two
        self.reveal = self._reveal
        lay = QVBoxLayout(self)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setAccessibleName("Models in the library")
        self.table.itemDoubleClicked.connect(lambda _i: self.on_load_button_clicked())
        lay.addWidget(self.table, 1)
        row = QHBoxLayout()
        self.load_button = QPushButton("Load")
        self.remove_button = QPushButton("Remove…")
        self.reveal_button = QPushButton("Show in file manager")
        for b, slot in (
            (self.load_button, self.on_load_button_clicked),
            (self.remove_button, self.on_remove_button_clicked),
            (self.reveal_button, self.on_reveal_button_clicked),
        ):
            b.clicked.connect(slot)
            row.addWidget(b)
        row.addStretch(1)
        lay.addLayout(row)
        self.empty = QLabel("No models yet: drop a GGUF file on the window, or use one of the models below.")
        self.empty.setWordWrap(True)
        lay.addWidget(self.empty)

        form = QFormLayout()
        self.import_mode = QComboBox()
        self.import_mode.setAccessibleName("When you open a model file")
        for key, label in IMPORT_MODES:
            self.import_mode.addItem(label, key)
        self.import_mode.setCurrentIndex(
            max(0, [k for k, _ in IMPORT_MODES].index(import_mode) if import_mode in dict(IMPORT_MODES) else 0)
        )
        self.import_mode.currentIndexChanged.connect(
            lambda _i: emit(self.import_mode_changed, self.import_mode.currentData())
        )
        form.addRow("When you open a model file", self.import_mode)
        lay.addLayout(form)

        lay.addWidget(QLabel("Models other apps have on this computer (used where they are, not copied):"))
        self.found = QTableWidget(0, 3)
        self.found.setHorizontalHeaderLabels(("App", "Size", "File"))
        self.found.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.found.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.found.verticalHeader().hide()
        self.found.horizontalHeader().setStretchLastSection(True)
        self.found.setAccessibleName("Models of other apps")
        self.found.setMaximumHeight(150)
        lay.addWidget(self.found)
        frow = QHBoxLayout()
        self.scan_button = QPushButton("Look for them")
        self.scan_button.clicked.connect(lambda: self.on_scan_button_clicked())
        self.use_found_button = QPushButton("Use the selected one")
        self.use_found_button.clicked.connect(self.on_use_found_button_clicked)
        self.found_note = QLabel()
        self.found_note.setWordWrap(True)
        frow.addWidget(self.scan_button)
        frow.addWidget(self.use_found_button)
        frow.addWidget(self.found_note, 1)
        lay.addLayout(frow)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.resize(900, 560)
        self.entries: list[ModelEntry] = []
        self.found_models: list[FoundModel] = []
        self.refresh()

    # -- the library ------------------------------------------------------------------------------

    def refresh(self) -> None:
        try:
            self.entries = self.library.list()
        except Exception as err:
            self.entries = []
            self.empty.setText(f"The model library cannot be read: {err}")
        self.table.setRowCount(len(self.entries))
        for r, e in enumerate(self.entries):
            path = e.file_path(self.library.folder)
            state = self.library.status(e)
            kept = STORAGE.get(e.storage, e.storage) + ("" if state == "ok" else f" ({state})")
            shown_path = e.source if e.storage != "copy" and e.source else str(path)
            values = (
                e.name,
                e.architecture,
                e.quantization,
                format_size(e.size),
                trained_context(path),
                format_last_used(e.last_used),
                kept,
                shown_path,
            )
            for c, v in enumerate(values):
                item = QTableWidgetItem(str(v))
                item.setToolTip(str(v))
                if c == 0:
                    item.setData(Qt.ItemDataRole.UserRole, e.sha256)
                self.table.setItem(r, c, item)
        self.empty.setVisible(not self.entries)
        if self.entries and self.table.currentRow() < 0:
            self.table.selectRow(0)
        self._update_buttons()

    def _update_buttons(self) -> None:
        has = bool(self.entries)
        for b in (self.load_button, self.remove_button, self.reveal_button):
            b.setEnabled(has)

    def selected(self) -> ModelEntry | None:
        r = self.table.currentRow()
        return self.entries[r] if 0 <= r < len(self.entries) else None

    def on_load_button_clicked(self) -> None:
        e = self.selected()
        if e is not None:
            emit(self.load_requested, e.sha256)
            self.accept()

    def on_remove_button_clicked(self) -> None:
        e = self.selected()
        if e is None:
            return
        if e.storage == "copy":
            text = (
                f"Remove {e.name} from your library? Its copy ({format_size(e.size)}) is deleted; "
                f"the file you imported it from is not touched."
            )
        else:
            text = (
                f"Remove {e.name} from your library? The file stays where it is "
                f"({e.source or e.path}); Llambda only forgets it."
            )
        if not self.confirm(text):
            return
        try:
            self.library.remove(e.sha256)
        except Exception as err:
            QMessageBox.warning(self, "Cannot remove this model", str(err))
        self.refresh()

    def on_reveal_button_clicked(self) -> None:
        e = self.selected()
        if e is not None:
            self.reveal(os.path.dirname(str(e.file_path(self.library.folder))))

    # -- other apps -------------------------------------------------------------------------------

    def on_scan_button_clicked(self, folders: list[tuple[str, Path]] | None = None) -> None:
        from app.library.elsewhere import find_models, other_app_folders  # lazy: app.library loads numpy (start-up)

        folders = other_app_folders() if folders is None else folders
        self.found_models = find_models(folders)
        known = {str(e.source) for e in self.entries} | {str(e.file_path(self.library.folder)) for e in self.entries}
        self.found_models = [m for m in self.found_models if str(m.path) not in known]
        self.found.setRowCount(len(self.found_models))
        for r, m in enumerate(self.found_models):
            for c, v in enumerate((m.app, format_size(m.size), str(m.path))):
                item = QTableWidgetItem(v)
                item.setToolTip(v)
                self.found.setItem(r, c, item)
        if not folders:
            self.found_note.setText("No folder of LM Studio, GPT4All, Jan or the Hugging Face cache here.")
        else:
            self.found_note.setText(
                f"{len(self.found_models)} model file(s) in " + ", ".join(sorted({a for a, _ in folders})) + "."
            )

    def on_use_found_button_clicked(self) -> None:
        r = self.found.currentRow()
        if 0 <= r < len(self.found_models):
            emit(self.open_in_place_requested, str(self.found_models[r].path))
            self.accept()

    # -- defaults that ask or open ----------------------------------------------------------------

    def _confirm(self, text: str) -> bool:
        return QMessageBox.question(self, "Remove model", text) == QMessageBox.StandardButton.Yes

    def _reveal(self, folder: str) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(folder))


__all__ = ["ModelsDialog", "IMPORT_MODES"]
