"""A small, safe Markdown renderer for model replies: text becomes Qt rich-text HTML, fenced code
becomes separate code segments (the view gives each a monospace block and a copy button).

Every character of the input is escaped before any markup is added, so no text from a user or a
model is ever interpreted as HTML. Not a full CommonMark implementation: headings, paragraphs,
lists, quotes, rules, fenced code, and inline code/bold/italic/strike/links are enough for chat.
An unclosed fence (a reply still streaming) is rendered as code up to the end.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class TextSegment:
    html: str


@dataclass(frozen=True)
class CodeSegment:
    language: str
    code: str
    closed: bool = True


Segment = TextSegment | CodeSegment

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_ORDERED = re.compile(r"^(\s*)(\d{1,9})[.)]\s+(.*)$")
_QUOTE = re.compile(r"^ {0,3}>\s?(.*)$")
_RULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.S)
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])", re.S)
_ITALIC_UNDER = re.compile(r"(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])", re.S)
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~", re.S)
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+)\)")

MONO = "font-family: monospace;"


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def inline(text: str) -> str:
    """Inline Markdown of one block of raw text -> escaped rich text."""
    spans: list[str] = []

    def keep(fragment: str) -> str:
        spans.append(fragment)
        return f"\x00{len(spans) - 1}\x00"

    # Code spans first: their content is literal.
    text = text.replace("\x00", "\ufffd")
    text = _CODE_SPAN.sub(lambda m: keep(f'<code style="{MONO}">{_escape(m.group(2).strip())}</code>'), text)
    text = _LINK.sub(lambda m: keep(f'<a href="{_escape(m.group(2))}">{_escape(m.group(1))}</a>'), text)
    out = _escape(text)
    out = _BOLD.sub(r"<b>\2</b>", out)
    out = _ITALIC_STAR.sub(r"<i>\1</i>", out)
    out = _ITALIC_UNDER.sub(r"<i>\1</i>", out)
    out = _STRIKE.sub(r"<s>\1</s>", out)
    out = out.replace("\n", "<br>")
    return re.sub("\x00(\\d+)\x00", lambda m: spans[int(m.group(1))], out)


def _blocks_to_html(lines: list[str]) -> str:
    return "".join(_blocks(lines))


def _blocks(lines: list[str]) -> list[str]:
    """Block structure of lines without fences: one HTML string per top-level block (paragraph,
    list, heading, rule, quote), so a streaming view redraws only the block that changed."""
    out: list[str] = []
    para: list[str] = []
    list_kind: str | None = None
    quote: list[str] = []

    def end_para() -> None:
        if para:
            out.append(f"<p>{inline(chr(10).join(para))}</p>")
            para.clear()

    def end_list() -> None:
        nonlocal list_kind
        if list_kind:
            out.append(f"</{list_kind}>")
            list_kind = None

    def end_quote() -> None:
        if quote:
            out.append(f"<blockquote>{_blocks_to_html(list(quote))}</blockquote>")
            quote.clear()

    for line in lines:
        q = _QUOTE.match(line)
        if q:
            end_para()
            end_list()
            quote.append(q.group(1))
            continue
        end_quote()
        if not line.strip():
            end_para()
            end_list()
            continue
        h = _HEADING.match(line)
        if h:
            end_para()
            end_list()
            level = min(len(h.group(1)) + 2, 6)  # chat headings stay modest
            out.append(f"<h{level}>{inline(h.group(2))}</h{level}>")
            continue
        if _RULE.match(line):
            end_para()
            end_list()
            out.append("<hr>")
            continue
        b = _BULLET.match(line)
        o = _ORDERED.match(line) if not b else None
        if b or o:
            end_para()
            kind = "ul" if b else "ol"
            if list_kind != kind:
                end_list()
                start = f' start="{int(o.group(2))}"' if o else ""
                out.append(f"<{kind}{start}>")
                list_kind = kind
            item = b.group(2) if b else o.group(3) if o else ""  # one of the two matched
            out.append(f"<li>{inline(item)}</li>")
            continue
        if list_kind and line.startswith((" ", "\t")):
            # continuation of a list item: append to the last item
            out[-1] = out[-1][:-5] + "<br>" + inline(line.strip()) + "</li>"
            continue
        end_list()
        para.append(line)
    end_quote()
    end_para()
    end_list()
    blocks: list[str] = []
    for token in out:
        if blocks and token.startswith(("<li>", "</ul>", "</ol>")):
            blocks[-1] += token
        else:
            blocks.append(token)
    return blocks


def render(text: str) -> list[Segment]:
    """Split `text` into text segments (escaped rich text) and code segments (raw code)."""
    segments: list[Segment] = []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    pending: list[str] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            pending.append(lines[i])
            i += 1
            continue
        segments.extend(TextSegment(b) for b in _blocks(pending))
        pending = []
        fence, lang = m.group(1), m.group(2)
        code: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            if lines[i].strip().startswith(fence[0] * len(fence)) and not lines[i].strip().strip(fence[0]):
                closed = True
                i += 1
                break
            code.append(lines[i])
            i += 1
        segments.append(CodeSegment(lang, "\n".join(code), closed))
    segments.extend(TextSegment(b) for b in _blocks(pending))
    return segments


def plain_to_html(text: str) -> str:
    """Plain text shown as rich text, every character literal (for mixed labels)."""
    return _escape(text).replace("\n", "<br>")


def plain_tooltip(text: str) -> str:
    """A tooltip that shows `text` literally (Qt guesses rich text in tooltips by itself)."""
    return f"<p>{plain_to_html(text)}</p>" if text else ""


__all__ = ["render", "inline", "plain_to_html", "plain_tooltip", "TextSegment", "CodeSegment"]
