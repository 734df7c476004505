"""The "Get models" page: search the Hub, a repository's GGUF files with our verdict on each,
downloads with progress, speed and time left, pause/resume/cancel; and the short list of
suggested models shown on the empty first screen (`FirstModelsPanel`).

State, worker, view: the work (app.hub) runs on Python threads; `_Bridge` carries its plain-dict
results to the UI thread as Qt signals; the widgets only show them. A finished download is in
the library already; `model_ready(sha256)` asks the window to load it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.errors import one_line
from app.ui.qt_fix import emit
from app.units import format_bytes

if TYPE_CHECKING:
    from app.hub import DownloadQueue
    from app.hub.files import RepoFiles


class _Bridge(QObject):
    """Lives on the UI thread; its signals are emitted from worker threads (queued to the UI)."""

    searched = Signal(object, object)  # (query, list of hit dicts | error text)
    listed = Signal(object, object)  # (repo id, RepoFiles | error text)
    judged = Signal(object, object, object)  # (repo id, file name, verdict dict | error text)
    download_event = Signal(object)  # a DownloadQueue event dict


def _duration(s: float | None) -> str:
    if s is None:
        return "–"
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


def progress_text(e: dict) -> str:
    """'download 42% of 1.1 GB · 8.3 MB/s · 1m05s left' from a progress event."""
    pct = 100 * e["done"] // max(e["total"], 1)
    text = f"{e['stage']} {pct}% of {format_bytes(e['total'])}"
    if e["stage"] == "download" and e.get("speed"):
        text += f" · {format_bytes(int(e['speed']))}/s · {_duration(e.get('eta'))} left"
    return text


class GetModelsPage(QDialog):
    """Search, pick a file that fits, download it. One per window, kept while the window lives."""

    model_ready = Signal(str)  # sha256 of a model now in the library

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Get models")
        self.setAccessibleName("Get models")
        self.resize(900, 620)
        self.bridge = _Bridge(self)
        self.bridge.searched.connect(self.on_bridge_searched)
        self.bridge.listed.connect(self.on_bridge_listed)
        self.bridge.judged.connect(self.on_bridge_judged)
        self.bridge.download_event.connect(self.on_bridge_download_event)
        self.repo: RepoFiles | None = None  # shown
        self.rows: dict[str, int] = {}  # download key -> row in the downloads list
        self._queue: DownloadQueue | None = None

        col = QVBoxLayout(self)
        row = QHBoxLayout()
        self.query = QLineEdit()
        self.query.setPlaceholderText("Search GGUF models on the Hugging Face Hub (e.g. qwen, llama 3.2, gemma)")
        self.query.setAccessibleName("Search the Hub")
        self.query.returnPressed.connect(self.on_search_button_clicked)
        self.search_button = QPushButton("Search")
        self.search_button.setAccessibleName("Search")
        self.search_button.clicked.connect(self.on_search_button_clicked)
        row.addWidget(self.query, 1)
        row.addWidget(self.search_button)
        col.addLayout(row)
        self.status = QLabel("Getting a model is the one time Llambda uses the network, and only when you ask.")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.status.setAccessibleName("Status")
        col.addWidget(self.status)

        self.results = QListWidget()
        self.results.setAccessibleName("Repositories")
        self.results.itemActivated.connect(self.on_results_item_activated)
        self.results.itemClicked.connect(self.on_results_item_activated)
        col.addWidget(self.results, 2)

        self.files = QTableWidget(0, 4)
        self.files.setHorizontalHeaderLabels(["File", "Quantization", "Size", "Our verdict"])
        self.files.horizontalHeader().setStretchLastSection(True)
        self.files.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.files.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.files.setAccessibleName("GGUF files")
        col.addWidget(self.files, 3)
        row = QHBoxLayout()
        self.download_button = QPushButton("Download")
        self.download_button.setEnabled(False)
        self.download_button.clicked.connect(self.on_download_button_clicked)
        self.files.itemSelectionChanged.connect(
            lambda: self.download_button.setEnabled(bool(self.files.selectedItems()))
        )
        row.addStretch(1)
        row.addWidget(self.download_button)
        col.addLayout(row)

        col.addWidget(QLabel("Downloads"))
        self.downloads = QListWidget()
        self.downloads.setAccessibleName("Downloads")
        col.addWidget(self.downloads, 2)
        row = QHBoxLayout()
        self.pause_button = QPushButton("Pause")
        self.resume_button = QPushButton("Resume")
        self.cancel_button = QPushButton("Cancel")
        for b, slot in (
            (self.pause_button, self.on_pause_button_clicked),
            (self.resume_button, self.on_resume_button_clicked),
            (self.cancel_button, self.on_cancel_button_clicked),
        ):
            b.clicked.connect(slot)
            row.addWidget(b)
        row.addStretch(1)
        self.token = QLineEdit()
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("Access token for gated models (hf_…)")
        self.token.setAccessibleName("Access token")
        self.token_button = QPushButton("Save token")
        self.token_button.clicked.connect(self.on_token_button_clicked)
        row.addWidget(self.token, 1)
        row.addWidget(self.token_button)
        col.addLayout(row)
        self.queue.restore()

    # -- the queue -----------------------------------------------------------------------------------

    @property
    def queue(self) -> DownloadQueue:
        if self._queue is None:
            from app.hub import DownloadQueue  # lazy: the window starts without app.hub (~45 ms of imports)

            self._queue = DownloadQueue(lambda e: emit(self.bridge.download_event, e))
        return self._queue

    def shutdown(self) -> None:
        """Pause the running download (its bytes are kept for next time)."""
        if self._queue is not None:
            self._queue.close()

    # -- search and listing ----------------------------------------------------------------------

    def _in_thread(self, work: Callable[[], None]) -> None:
        threading.Thread(target=work, name="llambda-hub", daemon=True).start()

    def search(self, query: str) -> None:
        self.query.setText(query)
        self.status.setText(f"Searching for {query!r}…")
        self.results.clear()

        def work() -> None:
            from app.hub import HubClient  # lazy: the window starts without app.hub (~45 ms of imports)

            found: list[dict] | str  # the repositories, or why there are none
            try:
                found = [h.to_json() for h in HubClient().search(query)]
            except Exception as e:
                found = one_line(str(e))
            emit(self.bridge.searched, query, found)

        self._in_thread(work)

    def on_search_button_clicked(self) -> None:
        self.search(self.query.text().strip())

    def on_bridge_searched(self, query: str, found: list[dict] | str) -> None:
        if isinstance(found, str):
            self.status.setText(found)
            return
        self.status.setText(
            f"{len(found)} GGUF repositories for {query!r}, most downloaded first. Pick one to see its files."
            if found
            else f"No GGUF models found for {query!r}."
        )
        for h in found:
            item = QListWidgetItem(
                f"{h['repo_id']}    ↓ {h['downloads']:,}   ♥ {h['likes']:,}" + ("   (gated)" if h["gated"] else "")
            )
            item.setData(Qt.ItemDataRole.UserRole, h["repo_id"])
            self.results.addItem(item)

    def on_results_item_activated(self, item: QListWidgetItem) -> None:
        self.open_repo(item.data(Qt.ItemDataRole.UserRole))

    def open_repo(self, repo_id: str, then_download: str | None = None) -> None:
        self.status.setText(f"Listing {repo_id}…")
        self.files.setRowCount(0)
        self.repo = None

        def work() -> None:
            from app.hub import HubClient, check_remote  # lazy: the window starts without app.hub (~45 ms of imports)

            client = HubClient()
            try:
                repo = client.repo_files(repo_id)
            except Exception as e:
                emit(self.bridge.listed, repo_id, one_line(str(e)))
                return
            emit(self.bridge.listed, repo_id, (repo, then_download))
            for f in repo.files:
                v: dict | str  # the verdict, or why there is none
                try:
                    v = check_remote(client, repo.repo_id, repo.revision, f).to_json()
                except Exception as e:
                    v = one_line(str(e))
                emit(self.bridge.judged, repo_id, f.name, v)

        self._in_thread(work)

    def on_bridge_listed(self, repo_id: str, listed: tuple[RepoFiles, str | None] | str) -> None:
        if isinstance(listed, str):
            self.status.setText(listed)
            return
        repo, then_download = listed
        self.repo = repo
        note = f"; licence: {repo.licence}" if repo.licence else ""
        if repo.gated:
            note += "; gated: accept its licence on the website, then save a token below"
        self.status.setText(f"{repo.repo_id}: {len(repo.files)} GGUF files{note}. Checking each header…")
        self.files.setRowCount(len(repo.files))
        for i, f in enumerate(repo.files):
            cells = (
                f.name + (f" ({len(f.parts)} parts)" if f.split else ""),
                f.quantization,
                format_bytes(f.size),
                "checking…",
            )
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, f.name)
                self.files.setItem(i, j, item)
        if then_download:
            try:
                self.queue.add(repo, repo.find(then_download))
            except KeyError:
                self.status.setText(f"{repo.repo_id} has no file {then_download} any more.")
            except Exception as e:
                self.status.setText(one_line(str(e)))

    def on_bridge_judged(self, repo_id: str, name: str, verdict: dict | str) -> None:
        if self.repo is None or self.repo.repo_id != repo_id:
            return
        for i in range(self.files.rowCount()):
            file_item, verdict_item = self.files.item(i, 0), self.files.item(i, 3)  # every row has both
            if file_item is not None and verdict_item is not None and file_item.data(Qt.ItemDataRole.UserRole) == name:
                text = (
                    verdict if isinstance(verdict, str) else f"{verdict['verdict']}: " + "; ".join(verdict["messages"])
                )
                verdict_item.setText(text)
                verdict_item.setToolTip(text)

    # -- downloads ---------------------------------------------------------------------------------

    def on_download_button_clicked(self) -> None:
        items = self.files.selectedItems()
        if not items or self.repo is None:
            return
        try:
            self.queue.add(self.repo, self.repo.find(items[0].data(Qt.ItemDataRole.UserRole)))
        except Exception as e:
            self.status.setText(one_line(str(e)))

    def download(self, repo_id: str, file_name: str) -> None:
        """List the repository (for the sizes and SHA-256), then queue the file."""
        self.open_repo(repo_id, then_download=file_name)

    def _selected_key(self) -> str | None:
        item = self.downloads.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def on_pause_button_clicked(self) -> None:
        if key := self._selected_key():
            self.queue.pause(key)

    def on_resume_button_clicked(self) -> None:
        if key := self._selected_key():
            self.queue.resume(key)

    def on_cancel_button_clicked(self) -> None:
        if key := self._selected_key():
            self.queue.cancel(key)

    def _row(self, key: str, name: str = "") -> QListWidgetItem:
        for i in range(self.downloads.count()):
            item = self.downloads.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == key:
                return item
        item = QListWidgetItem(name)
        item.setData(Qt.ItemDataRole.UserRole, key)
        item.setData(Qt.ItemDataRole.UserRole + 1, name)
        self.downloads.addItem(item)
        if self.downloads.currentItem() is None:
            self.downloads.setCurrentItem(item)
        return item

    def on_bridge_download_event(self, e: dict) -> None:
        kind = e["event"]
        if kind == "added":
            job = e["job"]
            item = self._row(job["key"], job["name"])
            pct = 100 * job["have"] // max(job["size"], 1)
            item.setText(
                f"{job['name']} — {job['state']} ({pct}% of {format_bytes(job['size'])})"
                + (f": {job['message']}" if job.get("message") else "")
            )
            return
        item = self._row(e["key"])
        name = item.data(Qt.ItemDataRole.UserRole + 1) or ""
        if kind == "progress":
            item.setText(f"{name} — {progress_text(e)}")
        elif kind == "state":
            item.setText(f"{name} — {e['state']}" + (f": {e['message']}" if e["message"] else ""))
            if e["state"] in ("failed", "deleted"):
                self.status.setText(e["message"])
            if e["state"] == "cancelled":
                self.downloads.takeItem(self.downloads.row(item))
        elif kind == "done":
            item.setText(f"{name} — in your library as {e['entry']['name']}")
            emit(self.model_ready, e["entry"]["sha256"])

    def on_token_button_clicked(self) -> None:
        from app.hub.token import save_token  # lazy: the window starts without app.hub (~45 ms of imports)

        try:
            where = save_token(self.token.text())
        except Exception as e:
            self.status.setText(one_line(str(e)))
            return
        self.token.clear()
        self.status.setText(f"The token is stored in the keyring ({where}). Resume the download to use it.")


class FirstModelsPanel(QFrame):
    """The empty first screen's offer: suggested models, each one click away, and a search."""

    download_requested = Signal(str, str)  # (repo id, file name)
    search_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        from app.hub.curated import CURATED  # lazy: the window starts without app.hub (~45 ms of imports)

        self.setObjectName("firstModels")
        self.setAccessibleName("Suggested models")
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 8, 0, 0)
        title = QLabel("Or get one of these from the Hugging Face Hub:")
        col.addWidget(title)
        self.buttons: list[QPushButton] = []
        for m in CURATED:
            row = QHBoxLayout()
            label = QLabel(f"{m.title} — {format_bytes(m.approx_bytes)} · {m.licence}\n{m.description}")
            label.setTextFormat(Qt.TextFormat.PlainText)
            label.setWordWrap(True)
            button = QPushButton("Get")
            button.setAccessibleName(f"Get {m.title}")
            button.setToolTip(f"{m.repo_id} / {m.file}")
            button.clicked.connect(lambda _=False, m=m: emit(self.download_requested, m.repo_id, m.file))
            self.buttons.append(button)
            row.addWidget(label, 1)
            row.addWidget(button)
            col.addLayout(row)
        row = QHBoxLayout()
        self.query = QLineEdit()
        self.query.setPlaceholderText("Search the Hub for other GGUF models…")
        self.query.setAccessibleName("Search the Hub")
        self.query.returnPressed.connect(lambda: emit(self.search_requested, self.query.text().strip()))
        go = QPushButton("Search")
        go.setAccessibleName("Search the Hub")
        go.clicked.connect(lambda: emit(self.search_requested, self.query.text().strip()))
        row.addWidget(self.query, 1)
        row.addWidget(go)
        col.addLayout(row)


__all__ = ["GetModelsPage", "FirstModelsPanel", "progress_text"]
