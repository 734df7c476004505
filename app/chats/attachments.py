"""Files attached to a message: plain text, Markdown, source code, and PDF (text through pypdf).

`read_attachment(path)` returns the text the model will read, or raises AttachmentError with a
one-line reason (not text, too big, a PDF without a text layer). `message_with_attachments`
puts the files before the user's words, each fenced and named, so any chat template carries it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from app.errors import LlambdaError

MAX_BYTES = 20 << 20  # bigger files are refused before reading: no context holds them
TEXT_SUFFIXES = frozenset(
    """
    txt text md markdown rst org tex csv tsv json jsonl yaml yml toml ini cfg conf log xml html htm css
    py pyi c h cc cpp hpp cxx hxx cs java kt kts scala go rs rb php pl pm lua r jl swift m mm js mjs cjs
    ts tsx jsx vue svelte sh bash zsh fish ps1 bat sql graphql proto gradle cmake mk make dockerfile
    diff patch srt vtt
""".split()
)
ATTACH_SUFFIXES = TEXT_SUFFIXES | {"pdf"}


class AttachmentError(LlambdaError, ValueError):
    """A file that cannot be attached (not text, too big, no text in a PDF)."""


@dataclass(frozen=True)
class Attachment:
    name: str
    text: str
    kind: str  # "text" or "pdf"
    pages: int = 0


def can_attach(path: str | Path) -> bool:
    """Whether a dropped file is one to attach (by its suffix) rather than a model to open."""
    p = Path(path)
    return p.suffix.lower().lstrip(".") in ATTACH_SUFFIXES or p.name.lower() in ("makefile", "dockerfile", "readme")


def read_attachment(path: str | Path) -> Attachment:
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as e:
        raise AttachmentError(f"{p}: cannot read: {e.strerror or e}") from None
    if not p.is_file():
        raise AttachmentError(f"{p}: not a file")
    if size > MAX_BYTES:
        raise AttachmentError(
            f"{p.name}: {size / 2**20:.0f} MB is too large to attach (at most "
            f"{MAX_BYTES >> 20} MB; a model's context holds far less)"
        )
    if p.suffix.lower() == ".pdf":
        return _read_pdf(p)
    data = p.read_bytes()
    if b"\0" in data[:8192]:
        raise AttachmentError(f"{p.name}: not a text file (attach text, Markdown, source code or PDF)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # old single-byte text files: readable, never fails
    return Attachment(p.name, text.replace("\r\n", "\n"), "text")


def _read_pdf(p: Path) -> Attachment:
    try:
        from pypdf import PdfReader  # lazy: only PDF attachments need pypdf (slow to import, may be missing)
        from pypdf.errors import PdfReadError
    except ImportError:
        raise AttachmentError("reading PDF files needs the pypdf package (reinstall Llambda)") from None
    try:
        reader = PdfReader(str(p))
        if reader.is_encrypted:
            raise AttachmentError(f"{p.name}: the PDF is password-protected")
        pages = [page.extract_text() or "" for page in reader.pages]
    except AttachmentError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as e:
        raise AttachmentError(f"{p.name}: the PDF cannot be read ({type(e).__name__}: {e})") from None
    text = "\n\n".join(t.strip() for t in pages if t.strip())
    if not text:
        raise AttachmentError(f"{p.name}: the PDF has no text layer (a scan?); nothing to read")
    return Attachment(p.name, text, "pdf", len(pages))


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    return "`" * max(3, longest + 1)


def message_with_attachments(text: str, attachments: list[Attachment]) -> str:
    """The user's message with each attached file before it, named and fenced."""
    parts = []
    for a in attachments:
        fence = _fence(a.text)
        parts.append(f"Attached file {a.name}:\n{fence}\n{a.text.rstrip()}\n{fence}")
    if text.strip():
        parts.append(text)
    return "\n\n".join(parts)


def share_that_fits(n_tokens: int, free_tokens: int) -> float:
    """The fraction of an attachment of `n_tokens` that `free_tokens` hold (0..1)."""
    return 0.0 if n_tokens <= 0 else max(0.0, min(1.0, free_tokens / n_tokens))


__all__ = [
    "Attachment",
    "AttachmentError",
    "read_attachment",
    "can_attach",
    "message_with_attachments",
    "share_that_fits",
    "ATTACH_SUFFIXES",
]
