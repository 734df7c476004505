"""A real `llambda serve` in-process: the SmolLM2 engine on its owner thread, and uvicorn on a free
loopback port in a thread. Several servers (different options) can share the one engine owner,
as the window and the server will."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from tests.ui.conftest import make_window  # noqa: F401 - the window fixture, for test_window_serve

N_CTX = 1024


@dataclass
class Served:
    url: str  # http://127.0.0.1:PORT
    port: int
    owner: object
    engine: object
    server: object
    thread: threading.Thread

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def start_server(owner, engine, **options) -> Served:
    from app.server.app import ServerOptions, create_app
    from app.server.cli import bind_socket, make_server, model_id_of

    host = options.pop("host", "127.0.0.1")
    sock = bind_socket(host, 0)
    port = sock.getsockname()[1]
    app = create_app(owner, model_id_of(engine.path), ServerOptions(host=host, port=port, **options))
    server = make_server(app, sock)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"uvicorn-{port}")
    thread.start()
    for _ in range(500):  # bounded: 10 s
        if server.started:
            break
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    shown = f"[{host}]" if ":" in host else host
    return Served(f"http://{shown}:{port}", port, owner, engine, server, thread)


@pytest.fixture(scope="session")
def served_engine(smollm2_path):
    """(engine, owner) for the whole session: SmolLM2, context 1024."""
    from app.engine.engine import Engine
    from app.server.owner import EngineOwner

    eng = Engine(smollm2_path, n_ctx=N_CTX)
    owner = EngineOwner(eng)
    yield eng, owner
    owner.close()
    eng.close()


@pytest.fixture(scope="session")
def served(served_engine):
    """The default server: loopback, no key, no CORS."""
    eng, owner = served_engine
    s = start_server(owner, eng)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def served_keyed(served_engine):
    """A server that wants a key and lets one web origin in (same engine owner)."""
    eng, owner = served_engine
    s = start_server(owner, eng, api_key="s3cret-key-123", cors_origin="http://localhost:3000")
    yield s
    s.stop()


def wait_idle(owner, timeout: float = 30.0) -> None:
    """Until the owner has no job queued or running (bounded)."""
    end = time.monotonic() + timeout
    while owner.queue_length and time.monotonic() < end:
        time.sleep(0.02)
    assert owner.queue_length == 0, "the engine owner did not become idle"
