"""Our verdict on a file still on the Hub, from its header alone: architecture supported, fits
this machine's memory at the default context, chat template present.

The header is fetched with range requests: the first HEADER_FIRST_BYTES, then more (doubling)
while the strict reader says the bytes at hand end inside the header, up to HEADER_MAX_BYTES.
The bytes go to a temporary file read by `open_gguf(..., full_size=)`, which checks tensor
offsets against the whole file's size. A split model is judged on its first part's metadata and
the tensors of all its parts. The verdict is `app.library.preflight`'s, at the context the
window would pick (`fitting_context`, or the one in settings).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.errors import ModelFormatError
from app.hub.client import HubClient, HubError
from app.hub.files import HubFile
from app.paths import cache_dir, ensure_dir

if TYPE_CHECKING:
    from app.gguf import GGUFFile

HEADER_FIRST_BYTES = 2 << 20
HEADER_MAX_BYTES = 64 << 20


@dataclass(frozen=True)
class RemoteVerdict:
    verdict: str  # ok | warn | refuse (preflight's words), or "unknown"
    supported: bool
    memory: str  # ok | warn | refuse | unknown
    template: str  # ok | missing | invalid | unknown
    n_ctx: int | None  # the context the memory check assumed
    messages: tuple[str, ...]
    header_bytes: int  # bytes fetched to judge it

    def summary(self) -> str:
        return f"{self.verdict}: " + "; ".join(self.messages)

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "supported": self.supported,
            "memory": self.memory,
            "template": self.template,
            "n_ctx": self.n_ctx,
            "messages": list(self.messages),
            "header_bytes": self.header_bytes,
        }


def _open_prefix(
    client: HubClient, location: str, headers: dict, size: int, what: str, tmpdir: str
) -> tuple[GGUFFile, int]:
    """(open GGUFFile over the shortest prefix that holds the header, bytes fetched)."""
    from app.gguf import open_gguf

    data = b""
    want = min(size, HEADER_FIRST_BYTES)
    path = os.path.join(tmpdir, f"header-{len(os.listdir(tmpdir))}.gguf")
    while True:
        data += client.fetch_range(location, headers, len(data), want, what)
        with open(path, "wb") as out:
            out.write(data)
        try:
            return open_gguf(path, full_size=size), len(data)
        except ModelFormatError as e:
            # The reader cannot tell a header cut short by our prefix from a damaged one; more
            # bytes settle it, up to the whole file or the cap.
            if len(data) >= size or len(data) >= HEADER_MAX_BYTES:
                raise ModelFormatError(f"{what}: {str(e).split(': ', 1)[-1]}") from None
            want = min(size, len(data) * 2, HEADER_MAX_BYTES)


def check_remote(
    client: HubClient,
    repo_id: str,
    revision: str,
    hub_file: HubFile,
    *,
    n_ctx: int | None = None,
    kv_type: str = "f16",
    available_bytes: int | None = None,
    total_bytes: int | None = None,
) -> RemoteVerdict:
    """Judge `hub_file` from its header(s). `n_ctx` None or 0: the context the app would pick.

    Raises HubError (network, 404, 401...) and ModelFormatError (a header that is not GGUF)."""
    from app.library.preflight import fitting_context, preflight

    work = ensure_dir(os.path.join(cache_dir(), "downloads"))
    fetched = 0
    with tempfile.TemporaryDirectory(prefix="headers-", dir=work) as tmp:
        opened = []
        try:
            for part in hub_file.parts:
                what = f"{repo_id}/{part.path}"
                location, headers, size = client.file_location(repo_id, part.path, revision)
                size = size or part.size
                if size != part.size:
                    raise HubError(f"{what}: the Hub lists {part.size:,} bytes but serves {size:,}", "mismatch")
                f, n = _open_prefix(client, location, headers, size, what, tmp)
                opened.append(f)
                fetched += n
            first = opened[0]
            if len(opened) > 1:  # a split model: the first part's metadata, every part's tensors
                merged = {}
                for f in opened:
                    merged.update(f.tensors)
                first.tensors = merged
            ctx = n_ctx or None
            if not ctx:
                try:
                    ctx = fitting_context(first, kv_type, available_bytes=available_bytes)[0]
                except Exception:  # unknown architecture etc.: preflight says why
                    ctx = None
            report = preflight(first, ctx, kv_type, available_bytes=available_bytes, total_bytes=total_bytes)
        finally:
            for f in opened:
                f.close()
    return RemoteVerdict(
        report.verdict,
        report.supported,
        report.memory_verdict,
        report.template_status,
        report.n_ctx,
        tuple(report.messages),
        fetched,
    )


__all__ = ["RemoteVerdict", "check_remote", "HEADER_FIRST_BYTES", "HEADER_MAX_BYTES"]
