"""Export one conversation to Markdown or JSON, written atomically (temporary file, rename).

The JSON carries everything the store knows (format "llambda-conversation", version 1); the
Markdown is for people: a title, the model and date, then one section per message.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from app.chats.store import ChatStore
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
        "format": EXPORT_FORMAT, "version": EXPORT_VERSION,
        "id": c.id, "title": c.title, "model": c.model, "system_prompt": c.system_prompt,
        "sampling": c.sampling, "created": _iso(c.created), "updated": _iso(c.updated),
        "messages": [
            {"role": m.role, "content": m.content, "status": m.status, "model": m.model,
             "prompt_tokens": m.prompt_tokens, "completion_tokens": m.completion_tokens,
             "timings": m.timings, "created": _iso(m.created)}
            for m in store.messages(conv_id)
        ],
    }


def conversation_to_markdown(store: ChatStore, conv_id: int) -> str:
    d = conversation_to_dict(store, conv_id)
    lines = [f"# {d['title'] or 'Untitled conversation'}", ""]
    facts = [f"model: {d['model']}" if d["model"] else None, d["created"] and f"started {d['created']}"]
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


__all__ = ["conversation_to_dict", "conversation_to_markdown", "export_json", "export_markdown"]
