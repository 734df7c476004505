"""The Hub as Llambda uses it: search GGUF repositories, list one repository's files with their
sizes and SHA-256, and fetch a byte range of a file; every failure becomes one line (HubError).

All requests go through `huggingface_hub` (HfApi, get_hf_file_metadata, http_get). The
endpoint is `HF_ENDPOINT` as it is at the call (the library reads it once at import), so tests
point it at their own server.
"""

from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from app import __version__, logs
from app.errors import LlambdaError
from app.hub.files import HubPart, RepoFiles, group_gguf_files

if TYPE_CHECKING:
    from huggingface_hub import HfApi
    from typing_extensions import Buffer

DEFAULT_ENDPOINT = "https://huggingface.co"
API_TIMEOUT_S = 20.0
SEARCH_LIMIT = 30


class HubError(LlambdaError, OSError):
    """The Hub could not be reached or refused a request; the message says which and what to do.

    `kind`: offline | dns | timeout | not_found | gated | unauthorized | http | mismatch |
    truncated | disk | cancelled | other."""

    def __init__(self, message: str, kind: str = "other"):
        super().__init__(message)
        self.kind = kind


class _ToOurLog(logging.Handler):
    """The library's log records go to Llambda's log, not straight to stderr."""

    def __init__(self) -> None:
        super().__init__()
        self.target = logs.get("hub")

    def handle(self, record: logging.LogRecord) -> bool:
        self.target.log(record.levelno, "huggingface_hub: %s", record.getMessage())
        return True


_READY: list[bool] = []


def hf() -> ModuleType:
    """`huggingface_hub`, imported on first use (~0.3 s) and set up once: no telemetry (it would
    also fetch an "agent harness" list from the Hub in every user-agent), its log in ours."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import huggingface_hub
    from huggingface_hub import constants

    if not _READY:
        constants.HF_HUB_DISABLE_TELEMETRY = True
        lg = logging.getLogger("huggingface_hub")
        lg.handlers = [_ToOurLog()]
        lg.propagate = False
        _READY.append(True)
    return huggingface_hub


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


@dataclass(frozen=True)
class RepoHit:
    """One search result."""

    repo_id: str
    downloads: int
    likes: int
    gated: bool

    def to_json(self) -> dict:
        return {"repo_id": self.repo_id, "downloads": self.downloads, "likes": self.likes, "gated": self.gated}


def _class_names(e: BaseException) -> set[str]:
    return {c.__name__ for c in type(e).__mro__}


def translate(e: BaseException, what: str, *, repo_id: str | None = None) -> HubError:
    """A one-line HubError for any failure of a request about `what` (a repo or a file)."""
    if isinstance(e, HubError):
        return e
    host = urlsplit(hub_endpoint()).netloc or hub_endpoint()
    names = _class_names(e)
    status = getattr(getattr(e, "response", None), "status_code", None)
    page = f"{hub_endpoint()}/{repo_id}" if repo_id else hub_endpoint()
    if "GatedRepoError" in names:
        return HubError(
            f"{what} is gated: accept its licence at {page} while signed in, then paste an "
            "access token (Get models → Token, or `llambda models token set`)",
            "gated",
        )
    if "RepositoryNotFoundError" in names:
        if status == 401:
            return HubError(
                f"{what}: no such repository on {host}, or it is private (a token with access to it is needed)",
                "not_found",
            )
        return HubError(f"{what}: no such repository on {host}", "not_found")
    if "RevisionNotFoundError" in names or "RemoteEntryNotFoundError" in names or "EntryNotFoundError" in names:
        return HubError(f"{what}: no such file on {host} (it may have been renamed or removed)", "not_found")
    if "OfflineModeIsEnabled" in names:
        return HubError("HF_HUB_OFFLINE is set: the Hub is not asked (unset it to download)", "offline")
    if status == 401:
        return HubError(f"{what}: the Hub refused the access token (401); paste a new one", "unauthorized")
    if status == 403:
        return HubError(f"{what}: access denied (403); the token may lack read access to it", "unauthorized")
    if status == 404:
        return HubError(f"{what}: not found on {host} (404)", "not_found")
    if status is not None:
        return HubError(f"{what}: the Hub answered HTTP {status}; try again later", "http")
    text = str(e)
    if "ConnectError" in names or "ConnectionError" in names or "NetworkError" in names:
        lowered = text.lower()
        if any(
            w in lowered
            for w in (
                "name or service not known",
                "nodename nor servname",
                "name resolution",
                "getaddrinfo",
                "no address associated",
                "name does not resolve",
            )
        ):
            return HubError(f"cannot look up {host} (DNS failed): no network, or the name is wrong", "dns")
        return HubError(f"cannot reach {host}: no network? ({_first_line(text) or 'connection refused'})", "offline")
    if "TimeoutException" in names or isinstance(e, TimeoutError):
        return HubError(f"{host} did not answer in time: the network is slow or down", "timeout")
    if "RemoteProtocolError" in names or "ReadError" in names:
        return HubError(f"the connection to {host} broke off while fetching {what}", "offline")
    return HubError(f"{what}: {type(e).__name__}: {_first_line(text)}", "other")


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


class _Bounded(io.RawIOBase):
    """A sink that keeps at most `limit` bytes and refuses more (a server ignoring Range)."""

    def __init__(self, limit: int):
        self.buf = bytearray()
        self.limit = limit

    def writable(self) -> bool:
        return True

    def write(self, b: Buffer) -> int:
        data = bytes(b)  # no copy of the bytes http_get writes
        if len(self.buf) + len(data) > self.limit:
            raise HubError("the server sent more than the byte range asked for", "http")
        self.buf += data
        return len(data)


class HubClient:
    """One conversation with the Hub: endpoint and token fixed at creation."""

    def __init__(self, token: str | None = None, endpoint: str | None = None):
        from app.hub.token import stored_token

        self.endpoint = (endpoint or hub_endpoint()).rstrip("/")
        self.token = token if token is not None else stored_token()

    def _api(self) -> HfApi:
        return hf().HfApi(
            endpoint=self.endpoint, token=self.token or None, library_name="llambda", library_version=__version__
        )

    # -- search and listing -------------------------------------------------------------------

    def search(self, query: str, limit: int = SEARCH_LIMIT) -> list[RepoHit]:
        """GGUF repositories matching `query`, most downloaded first (one page of results).

        The same request as `HfApi.list_models(search=, filter="gguf", sort="downloads", limit=,
        expand=)`, sent once through the library's session: list_models retries a refused
        connection with back-off for about 23 s, and a person offline should hear so at once."""
        hub = hf()
        ModelInfo, get_session, hf_raise_for_status = hub.ModelInfo, hub.get_session, hub.hf_raise_for_status
        from huggingface_hub.utils import build_hf_headers

        params = {
            "filter": "gguf",
            "sort": "downloads",
            "direction": -1,
            "limit": max(1, min(limit, 100)),
            "expand": ["downloads", "likes", "gated"],
        }
        if query.strip():
            params["search"] = query.strip()
        try:
            r = get_session().get(
                f"{self.endpoint}/api/models",
                params=params,
                headers=build_hf_headers(token=self.token or None, library_name="llambda", library_version=__version__),
                timeout=API_TIMEOUT_S,
            )
            hf_raise_for_status(r)
            found = [ModelInfo(**item) for item in r.json()]
        except Exception as e:
            raise translate(e, f"search for {query!r}") from None
        return [RepoHit(m.id, int(m.downloads or 0), int(m.likes or 0), bool(m.gated)) for m in found][:limit]

    def repo_files(self, repo_id: str) -> RepoFiles:
        """The repository's GGUF files at its current commit, with sizes and SHA-256."""
        try:
            info = self._api().model_info(repo_id, files_metadata=True, timeout=API_TIMEOUT_S)
        except Exception as e:
            raise translate(e, repo_id, repo_id=repo_id) from None
        parts = []
        for s in info.siblings or []:
            lfs = s.lfs
            size = lfs.size if lfs is not None else s.size
            parts.append(HubPart(s.rfilename, int(size or 0), (lfs.sha256 if lfs is not None else None)))
        files, incomplete = group_gguf_files(parts)
        licence = None
        card = info.card_data
        if card is not None:
            licence = getattr(card, "license", None) or (card.get("license") if hasattr(card, "get") else None)
        if not licence:
            licence = next((t.split(":", 1)[1] for t in info.tags or [] if t.startswith("license:")), None)
        return RepoFiles(
            repo_id,
            info.sha or "main",
            tuple(files),
            licence if isinstance(licence, str) else None,
            bool(info.gated),
            tuple(incomplete),
        )

    # -- file transfer ------------------------------------------------------------------------

    def file_location(self, repo_id: str, path: str, revision: str) -> tuple[str, dict, int | None]:
        """(URL to GET, headers to send, size) for one file, after the Hub's redirect if any."""
        get_hf_file_metadata, hf_hub_url = hf().get_hf_file_metadata, hf().hf_hub_url
        from huggingface_hub.utils import build_hf_headers

        url = hf_hub_url(repo_id, path, revision=revision, endpoint=self.endpoint)
        try:
            meta = get_hf_file_metadata(url, token=self.token or None, timeout=API_TIMEOUT_S, endpoint=self.endpoint)
        except Exception as e:
            raise translate(e, f"{repo_id}/{path}", repo_id=repo_id) from None
        headers = build_hf_headers(token=self.token or None, library_name="llambda", library_version=__version__)
        location = meta.location or url
        if urlsplit(location).netloc != urlsplit(url).netloc:
            headers.pop("authorization", None)  # a signed CDN address: the token stays home
        return location, headers, meta.size

    def fetch_range(self, location: str, headers: dict, start: int, end: int, what: str) -> bytes:
        """Bytes [start, end) of a file at `location` (from file_location), one range request."""
        hf()
        from huggingface_hub.file_download import http_get

        sink = _Bounded(end - start)
        h = dict(headers)
        h["Range"] = f"bytes={start}-{end - 1}"
        try:
            http_get(
                location,
                sink,  # type: ignore[arg-type]  # a raw binary sink
                headers=h,
                expected_size=end - start,
                tqdm_class=SilentBar,
            )
        except Exception as e:
            raise translate(e, what) from None
        return bytes(sink.buf)


class SilentBar:
    """A progress bar that shows nothing (http_get wants one); download.py's meter extends it."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> SilentBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


__all__ = ["HubClient", "HubError", "RepoHit", "hub_endpoint", "translate", "hf"]
