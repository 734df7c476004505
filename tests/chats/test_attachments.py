"""Attachments: text, Markdown, code and PDF files read into the message; what is not text says so."""

from __future__ import annotations

import pytest

from app.chats.attachments import (
    AttachmentError,
    can_attach,
    message_with_attachments,
    read_attachment,
    share_that_fits,
)


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF with `text` in Helvetica, its cross-reference table computed."""
    stream = f"BT /F1 24 Tf 72 720 Td ({text}) Tj ET".encode()
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def test_text_markdown_code_and_pdf(tmp_path):
    (tmp_path / "notes.md").write_text("# Title\n\nSome *notes*.\r\n")
    (tmp_path / "main.py").write_text("print('```')\n")
    (tmp_path / "paper.pdf").write_bytes(tiny_pdf("Hello from a PDF"))
    md = read_attachment(tmp_path / "notes.md")
    assert md.text == "# Title\n\nSome *notes*.\n" and md.kind == "text"
    pdf = read_attachment(tmp_path / "paper.pdf")
    assert pdf.kind == "pdf" and pdf.pages == 1 and "Hello from a PDF" in pdf.text
    msg = message_with_attachments("What is in these?", [md, read_attachment(tmp_path / "main.py")])
    assert msg.startswith("Attached file notes.md:\n```\n# Title") and msg.endswith("What is in these?")
    assert "````\nprint('```')\n````" in msg  # a fence longer than any inside the file
    assert all(can_attach(tmp_path / n) for n in ("notes.md", "main.py", "paper.pdf", "a.TXT"))
    assert not can_attach(tmp_path / "model.gguf") and not can_attach(tmp_path / "photo.png")


def test_what_cannot_be_attached_says_why(tmp_path):
    (tmp_path / "blob.txt").write_bytes(b"\x00\x01binary")
    (tmp_path / "scan.pdf").write_bytes(tiny_pdf(""))
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really")
    for name, words in (
        ("blob.txt", "not a text file"),
        ("scan.pdf", "no text layer"),
        ("broken.pdf", "cannot be read"),
        ("missing.md", "cannot read"),
    ):
        with pytest.raises(AttachmentError, match=words) as e:
            read_attachment(tmp_path / name)
        assert "\n" not in str(e.value)


def test_share_that_fits():
    assert share_that_fits(1000, 250) == 0.25 and share_that_fits(10, 50) == 1.0 and share_that_fits(0, 5) == 0.0
