"""A local stand-in for the Hugging Face Hub: the part of its HTTP API that Llambda uses, on
127.0.0.1, for `huggingface_hub` itself to talk to (point `HF_ENDPOINT` at `FakeHub.url`).

Served:
    GET  /api/models?search=&filter=gguf&sort=downloads&limit=    search (JSON list)
    GET  /api/models/{repo}[/revision/{rev}]?blobs=true            model info, siblings with LFS sha256
    HEAD /{repo}/resolve/{rev}/{path}                              X-Repo-Commit, X-Linked-Etag, X-Linked-Size
    GET  /{repo}/resolve/{rev}/{path}                              bytes, with Range (206, Content-Range)
Errors carry X-Error-Code as the Hub's do (RepoNotFound, EntryNotFound, GatedRepo), which is
how the library tells them apart. Crafted failures per file: drop the connection after N bytes
(a number of times), then answer with a status; declare a wrong SHA-256; serve fewer bytes than
declared (truncated); send slowly. Every request is logged in `requests`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

GOOD_TOKEN = "hf_test_good_token"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class FakeFile:
    path: str  # rfilename
    source: Path  # the bytes served
    sha256: str | None = None  # declared; None: computed from the source
    declared_size: int | None = None  # None: the source's size
    drop_after: int | None = None  # close the connection after this many body bytes...
    drops: int = 0  # ...this many times
    status_after_drops: int | None = None  # then answer GETs with this status...
    status_count: int = 0  # ...this many times
    bytes_per_s: float | None = None  # slow
    lfs: bool = True

    def __post_init__(self):
        self.real_size = self.source.stat().st_size
        if self.declared_size is None:
            self.declared_size = self.real_size
        if self.sha256 is None:
            self.sha256 = sha256_file(self.source)


@dataclass
class FakeRepo:
    repo_id: str
    files: list[FakeFile]
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    downloads: int = 100
    likes: int = 5
    gated: bool = False
    licence: str = "apache-2.0"
    extra_files: list[str] = field(default_factory=lambda: ["README.md", "config.json"])

    def file(self, path: str) -> FakeFile | None:
        return next((f for f in self.files if f.path == path), None)


class FakeHub:
    def __init__(self):
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[tuple[str, str, dict]] = []
        self.lock = threading.Lock()
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-hub", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, repo: FakeRepo) -> FakeRepo:
        self.repos[repo.repo_id] = repo
        return repo

    def start(self) -> "FakeHub":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def count(self, method: str, pattern: str) -> int:
        with self.lock:
            return sum(1 for m, p, _h in self.requests if m == method and re.search(pattern, p))


RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+?)(?:/revision/(?P<rev>[^/]+))?$")
RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    # -- plumbing -------------------------------------------------------------------------------

    def _log(self) -> None:
        with self.hub.lock:
            self.hub.requests.append((self.command, self.path, dict(self.headers)))

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def _json(self, status: int, data) -> None:
        self._send(status, json.dumps(data).encode(), {"Content-Type": "application/json"})

    def _error(self, status: int, code: str | None, message: str, head: bool = False) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, json.dumps({"error": message}).encode(), headers, head=head)

    def _authorized(self) -> bool:
        return self.headers.get("Authorization", "") == f"Bearer {GOOD_TOKEN}"

    # -- routes ---------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._log()
        url = urlsplit(self.path)
        path = unquote(url.path)
        if path == "/api/models":
            return self._search(parse_qs(url.query))
        m = INFO.match(path)
        if m:
            return self._info(m["repo"])
        m = RESOLVE.match(path)
        if m:
            return self._resolve(m["repo"], m["rev"], m["path"], head=False)
        self._error(404, None, "no such route")

    def do_HEAD(self) -> None:
        self._log()
        m = RESOLVE.match(unquote(urlsplit(self.path).path))
        if m:
            return self._resolve(m["repo"], m["rev"], m["path"], head=True)
        self._error(404, None, "no such route", head=True)

    def _search(self, q: dict) -> None:
        words = (q.get("search") or [""])[0].lower()
        limit = int((q.get("limit") or ["1000"])[0])
        hits = [
            r
            for r in self.hub.repos.values()
            if words in r.repo_id.lower() and any(f.path.endswith(".gguf") for f in r.files)
        ]
        hits.sort(key=lambda r: -r.downloads)
        self._json(
            200,
            [
                {
                    "_id": r.sha[:24],
                    "id": r.repo_id,
                    "downloads": r.downloads,
                    "likes": r.likes,
                    "gated": "manual" if r.gated else False,
                }
                for r in hits[:limit]
            ],
        )

    def _info(self, repo_id: str) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        siblings = [{"rfilename": name, "size": 100, "blobId": "0" * 40} for name in repo.extra_files]
        for f in repo.files:
            s = {"rfilename": f.path, "size": f.declared_size, "blobId": "1" * 40}
            if f.lfs:
                s["lfs"] = {"size": f.declared_size, "sha256": f.sha256, "pointerSize": 135}
            siblings.append(s)
        self._json(
            200,
            {
                "_id": repo.sha[:24],
                "id": repo.repo_id,
                "sha": repo.sha,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "downloads": repo.downloads,
                "likes": repo.likes,
                "tags": ["gguf", f"license:{repo.licence}"],
                "cardData": {"license": repo.licence},
                "siblings": siblings,
            },
        )

    def _resolve(self, repo_id: str, rev: str, path: str, head: bool) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", "Repository not found", head=head)
        if rev not in (repo.sha, "main"):
            return self._error(404, "RevisionNotFound", "Invalid rev id", head=head)
        f = repo.file(path)
        if f is None:
            return self._error(404, "EntryNotFound", "Entry not found", head=head)
        if repo.gated and not self._authorized():
            return self._error(401, "GatedRepo", "Access to this model is restricted", head=head)
        meta = {
            "X-Repo-Commit": repo.sha,
            "ETag": f'"{f.sha256}"',
            "X-Linked-Etag": f'"{f.sha256}"',
            "X-Linked-Size": f.declared_size,
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if head:
            return self._send(200, b"", {**meta, "Content-Length": f.declared_size}, head=True)
        with self.hub.lock:
            if f.drops <= 0 and f.status_count > 0 and f.status_after_drops:
                f.status_count -= 1
                status = f.status_after_drops
            else:
                status = None
        if status:
            return self._error(status, None, "crafted failure")
        start, end = 0, f.real_size - 1
        rng = self.headers.get("Range")
        partial = False
        if rng:
            m = RANGE.match(rng.strip())
            if not m:
                return self._error(416, None, "bad range")
            if m[1]:
                start = int(m[1])
                end = min(int(m[2]), f.real_size - 1) if m[2] else f.real_size - 1
            else:
                start = max(0, f.real_size - int(m[2]))
            if start >= f.real_size:
                return self._send(416, b"", {"Content-Range": f"bytes */{f.real_size}"})
            partial = True
        length = end - start + 1
        headers = {**meta, "Content-Length": length}
        if partial:
            headers["Content-Range"] = f"bytes {start}-{end}/{f.real_size}"
        self.send_response(206 if partial else 200)
        for k, v in headers.items():
            self.send_header(k, str(v))
        self.end_headers()
        with self.hub.lock:
            drop = f.drop_after if (f.drop_after is not None and f.drops > 0) else None
            if drop is not None:
                f.drops -= 1
        sent = 0
        with open(f.source, "rb") as src:
            src.seek(start)
            while sent < length:
                n = min(64 << 10, length - sent)
                if drop is not None:
                    n = min(n, drop - sent)
                    if n <= 0:
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                chunk = src.read(n)
                if not chunk:
                    break
                try:
                    self.wfile.write(chunk)
                except OSError:
                    return
                sent += len(chunk)
                if f.bytes_per_s:
                    time.sleep(len(chunk) / f.bytes_per_s)
