"""Export one conversation to Markdown or JSON, written atomically (temporary file, rename), and
import such a JSON file back (a new conversation with the same messages, settings and figures).

The JSON carries everything the store knows (format "llambda-conversation", version 1); the
Markdown is for people: a title, the model and date, then one section per message.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from app.chats.store import ROLES, ChatStore
from app.errors import LlambdaError
from app.paths import atomic_write_text

EXPORT_FORMAT = "llambda-conversation"
EXPORT_VERSION = 1


def _iso(t: float | None) -> str | None:
    if not t:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def conversation_to_dict(store: ChatStore, conv_id: int) -> dict:
    c = store.get_conversation(conv_id)
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "id": c.id,
        "title": c.title,
        "model": c.model,
        "system_prompt": c.system_prompt,
        "sampling": c.sampling,
        "created": _iso(c.created),
        "updated": _iso(c.updated),
        "messages": [
            {
                "role": m.role,
                "content": m.content,
                "status": m.status,
                "model": m.model,
                "prompt_tokens": m.prompt_tokens,
                "completion_tokens": m.completion_tokens,
                "timings": m.timings,
                "created": _iso(m.created),
            }
            for m in store.messages(conv_id)
        ],
    }


def conversation_to_markdown(store: ChatStore, conv_id: int) -> str:
    d = conversation_to_dict(store, conv_id)
    lines = [f"# {d['title'] or 'Untitled conversation'}", ""]
    facts: list[Any] = [f"model: {d['model']}" if d["model"] else None, d["created"] and f"started {d['created']}"]
    facts = [f for f in facts if f]
    if facts:
        lines += ["*" + " · ".join(facts) + "*", ""]
    if d["system_prompt"]:
        lines += ["## System", "", d["system_prompt"], ""]
    for m in d["messages"]:
        head = m["role"].capitalize()
        if m["status"] not in ("complete",):
            head += f" ({m['status']})"
        lines += [f"## {head}", "", m["content"], ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def export_json(store: ChatStore, conv_id: int, path: str | Path) -> Path:
    text = json.dumps(conversation_to_dict(store, conv_id), ensure_ascii=False, indent=2) + "\n"
    return atomic_write_text(path, text)


def export_markdown(store: ChatStore, conv_id: int, path: str | Path) -> Path:
    return atomic_write_text(path, conversation_to_markdown(store, conv_id))


FORMATS = {"md": export_markdown, "json": export_json}


def export_conversation(store: ChatStore, conv_id: int, path: str | Path, fmt: str) -> Path:
    """Write conversation `conv_id` to `path` as "md" or "json" (atomically)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r} (md or json)")
    return FORMATS[fmt](store, conv_id, path)


def export_file_name(store: ChatStore, conv_id: int, fmt: str) -> str:
    """A file name for a conversation: its id and a slug of its title ("12-what-is-gguf.md")."""
    title = store.get_conversation(conv_id).title
    slug = re.sub(r"[^\w]+", "-", title.casefold(), flags=re.UNICODE).strip("-")[:48] or "chat"
    return f"{conv_id}-{slug}.{fmt}"


class ExportError(LlambdaError, ValueError):
    """An export or import that cannot be done: unknown format, a file that is not an export."""


def import_json(store: ChatStore, path: str | Path) -> int:
    """Add the conversation exported in `path` as a new one; returns its id. The file is checked
    first (format, version, roles, text), so a wrong file adds nothing."""
    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ExportError(f"{path}: cannot read: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExportError(f"{path}: not a Llambda conversation export (not JSON: {e})") from None
    if not isinstance(d, dict) or d.get("format") != EXPORT_FORMAT:
        raise ExportError(f"{path}: not a Llambda conversation export (format is not {EXPORT_FORMAT!r})")
    if d.get("version") != EXPORT_VERSION:
        raise ExportError(
            f"{path}: export version {d.get('version')!r} is not one this Llambda reads ({EXPORT_VERSION})"
        )
    messages = d.get("messages")
    if not isinstance(messages, list):
        raise ExportError(f"{path}: the export has no message list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise ExportError(f"{path}: message {i + 1} is not a message (role and text)")

    def text(v: object) -> str:
        return v if isinstance(v, str) else ""

    def count(v: object) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    conv_id = store.create_conversation(
        text(d.get("title")),
        model=d.get("model") if isinstance(d.get("model"), str) else None,
        system_prompt=text(d.get("system_prompt")),
        sampling=d.get("sampling") if isinstance(d.get("sampling"), dict) else {},
    )
    for m in messages:
        timings = m.get("timings") if isinstance(m.get("timings"), dict) else {}
        model = m.get("model") if isinstance(m.get("model"), str) else None
        status = m.get("status")
        if status in ("interrupted", "error"):
            msg_id = store.begin_reply(conv_id, model=model, role=m["role"])
            store.finish_reply(
                msg_id,
                {
                    "prompt_tokens": count(m.get("prompt_tokens")),
                    "completion_tokens": count(m.get("completion_tokens")),
                    **timings,
                },
                text=m["content"],
                status=status,
            )
        else:
            store.add_message(
                conv_id,
                m["role"],
                m["content"],
                model=model,
                prompt_tokens=count(m.get("prompt_tokens")),
                completion_tokens=count(m.get("completion_tokens")),
                timings=timings,
            )
    return conv_id


__all__ = [
    "conversation_to_dict",
    "conversation_to_markdown",
    "export_json",
    "export_markdown",
    "export_conversation",
    "export_file_name",
    "import_json",
    "ExportError",
    "FORMATS",
]
