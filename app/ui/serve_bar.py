"""The window's switch for the local server: "Serve this model on localhost:PORT", the address to
copy, and a live count of requests (served, and waiting or running).

The server shares the window's engine: its requests are posted to the engine worker's own queue
(`EngineWorker.on_server_job_requested`), so they wait behind the window's replies and the
window's wait behind them; nothing decodes on the engine from another thread. uvicorn runs on a
plain Python thread; Qt only carries the jobs to the worker. Listens on 127.0.0.1 only, with the
same guards as `llambda serve` (app/server/app.py).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QApplication, QCheckBox, QHBoxLayout, QLabel, QLineEdit, QSpinBox, QToolButton, QWidget

from app.ui.qt_fix import emit

if TYPE_CHECKING:
    import socket

    import uvicorn

    from app.server.app import Api
    from app.server.owner import ForwardingOwner
    from app.ui.worker import EngineWorker

DEFAULT_PORT = 8080
REFRESH_MS = 500


class ServeBar(QWidget):
    job_requested = Signal(object, object)  # (owner, job) -> the worker's queue
    serving_changed = Signal(bool)

    def __init__(self, worker: EngineWorker, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("serveBar")
        self.worker = worker
        self.model_id: str | None = None
        self.owner: ForwardingOwner | None = None
        self.api: Api | None = None
        self.server: uvicorn.Server | None = None
        self.server_thread: threading.Thread | None = None  # not `thread`: that is QObject.thread()
        self.url = ""
        self.error = ""

        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 0, 6, 0)
        lay.setSpacing(4)
        self.switch = QCheckBox("Serve on port")
        self.switch.setToolTip(
            "Serve this model on localhost: an OpenAI-compatible API for other programs on this computer"
        )
        self.switch.setEnabled(False)
        self.switch.setAccessibleName("Serve this model")
        self.port = QSpinBox()
        self.port.setRange(1024, 65535)
        self.port.setValue(DEFAULT_PORT)
        self.port.setAccessibleName("Port")
        self.port.lineEdit().setAccessibleName("Port")
        self.address = QLineEdit()
        self.address.setReadOnly(True)
        self.address.setAccessibleName("Server address")
        self.address.setMinimumWidth(190)
        self.copy_button = QToolButton()
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy the address")
        self.copy_button.setAccessibleName("Copy the server address")
        self.count = QLabel("")
        self.count.setAccessibleName("Server requests")
        for w in (self.switch, self.port, self.address, self.copy_button, self.count):
            lay.addWidget(w)
        self._show(False)

        self.switch.toggled.connect(self.on_switch_toggled)
        self.copy_button.clicked.connect(self.on_copy_button_clicked)
        self.job_requested.connect(worker.on_server_job_requested)
        worker.model_loaded.connect(self.on_worker_model_loaded)
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)

    # -- slots ---------------------------------------------------------------------------------------

    def on_worker_model_loaded(self, info: dict) -> None:
        name = str((info or {}).get("name") or "model")
        self.model_id = name[:-5] if name.lower().endswith(".gguf") else name
        if self.api is not None:
            self.api.model_id = self.model_id
        self.switch.setEnabled(True)

    def on_switch_toggled(self, on: bool) -> None:
        if on and self.server is None:
            if not self.start(self.port.value()):
                self.switch.blockSignals(True)
                self.switch.setChecked(False)
                self.switch.blockSignals(False)
        elif not on:
            self.stop()

    def on_copy_button_clicked(self) -> None:
        if self.url:
            QApplication.clipboard().setText(self.url)

    # -- serving -------------------------------------------------------------------------------------

    def start(self, port: int) -> bool:
        """Listen on 127.0.0.1:port (0: any free port). False, with `self.error`, if it cannot."""
        from app.server.app import ServerOptions, create_app  # lazy: starlette and uvicorn, only to serve
        from app.server.cli import bind_socket, make_server
        from app.server.owner import ForwardingOwner

        self.error = ""
        try:
            sock = bind_socket("127.0.0.1", port)
        except OSError as e:
            self.error = f"cannot listen on port {port}: {e.strerror or e}"
            self.count.setText(self.error)
            self.count.show()
            return False
        port = sock.getsockname()[1]
        owner = ForwardingOwner(lambda job: emit(self.job_requested, owner, job))
        app = create_app(owner, self.model_id or "model", ServerOptions(port=port))
        self.owner, self.api = owner, app.api
        self.server = make_server(app, sock)
        self.server_thread = threading.Thread(
            target=self._run, args=(self.server, sock), daemon=True, name=f"llambda-serve-{port}"
        )
        self.server_thread.start()
        self.url = f"http://127.0.0.1:{port}/v1"
        self.address.setText(self.url)
        self._show(True)
        self.refresh()
        self.timer.start()
        emit(self.serving_changed, True)
        return True

    @staticmethod
    def _run(server: uvicorn.Server, sock: socket.socket) -> None:
        with sock:
            server.run(sockets=[sock])

    def stop(self) -> None:
        """Stop listening; a request still running is cancelled. Safe to call twice."""
        self.timer.stop()
        server, owner, thread = self.server, self.owner, self.server_thread
        self.server = self.owner = self.server_thread = None
        if server is not None:
            server.should_exit = True
        if owner is not None:
            owner.close()
        if thread is not None:
            thread.join(5)
        if server is not None:
            self.url = ""
            self._show(False)
            emit(self.serving_changed, False)

    def refresh(self) -> None:
        if self.owner is None:
            return
        served = self.api.requests_served if self.api is not None else 0
        queued = self.owner.queue_length
        text = f"{served} request{'s' if served != 1 else ''}"
        if queued:
            text += f" · {queued} in queue"
        self.count.setText(text)

    @property
    def serving(self) -> bool:
        return self.server is not None

    def _show(self, serving: bool) -> None:
        self.port.setEnabled(not serving)
        for w in (self.address, self.copy_button, self.count):
            w.setVisible(serving)


__all__ = ["ServeBar", "DEFAULT_PORT"]
