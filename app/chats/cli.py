"""`llambda chats list|export|import`: conversations from the command line.

    llambda chats list [--json]
    llambda chats export ID [--format md|json] [-o FILE]      (stdout without -o)
    llambda chats export --all [--format md|json] [-o DIR]    (one file per conversation)
    llambda chats import FILE.json

Files are written atomically; a JSON export imports back as a new conversation.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.chats.export import (
    ExportError,
    conversation_to_dict,
    conversation_to_markdown,
    export_conversation,
    export_file_name,
    import_json,
)
from app.chats.store import ChatStore
from app.errors import EXIT_OK, EXIT_USAGE


def configure_parser(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="chats_command", metavar="{list,export,import}")
    sub.required = True
    s = sub.add_parser("list", help="the conversations: id, messages, title")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s = sub.add_parser("export", help="write conversations as Markdown or JSON")
    s.add_argument("id", nargs="?", type=int, help="the conversation's id (llambda chats list)")
    s.add_argument("--all", action="store_true", help="every conversation, one file each")
    s.add_argument("--format", choices=("md", "json"), default="md", help="Markdown (default) or JSON")
    s.add_argument(
        "-o",
        "--output",
        help="the file (one conversation) or folder (--all); one conversation without it goes to stdout",
    )
    s = sub.add_parser("import", help="add a conversation from a JSON export")
    s.add_argument("file", help="a file written by llambda chats export --format json")


def run_chats(args: argparse.Namespace) -> int:
    with ChatStore() as store:
        try:
            if args.chats_command == "list":
                return _list(store, args.json)
            if args.chats_command == "import":
                conv_id = import_json(store, args.file)
                print(f"imported as conversation {conv_id}: {store.get_conversation(conv_id).title}")
                return EXIT_OK
            return _export(store, args)
        except ExportError as e:
            print(f"llambda: error: {e}", file=sys.stderr)
            return EXIT_USAGE


def _list(store: ChatStore, as_json: bool) -> int:
    convs = store.list_conversations()
    rows = [{"id": c.id, "title": c.title, "model": c.model, "messages": len(store.messages(c.id))} for c in convs]
    if as_json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
    else:
        for r in rows:
            print(f"{r['id']:>5}  {r['messages']:>4} messages  {r['title']}")
    return EXIT_OK


def _export(store: ChatStore, args: argparse.Namespace) -> int:
    if args.all == (args.id is not None):
        print("llambda: error: give one conversation id or --all", file=sys.stderr)
        return EXIT_USAGE
    known = {c.id for c in store.list_conversations()}
    if args.all:
        folder = Path(args.output or ".")
        if folder.exists() and not folder.is_dir():
            print(f"llambda: error: {folder} is not a folder (--all writes one file per conversation)", file=sys.stderr)
            return EXIT_USAGE
        folder.mkdir(parents=True, exist_ok=True)
        for conv_id in sorted(known):
            out = export_conversation(
                store, conv_id, folder / export_file_name(store, conv_id, args.format), args.format
            )
            print(out)
        return EXIT_OK
    if args.id not in known:
        print(f"llambda: error: no conversation {args.id} (llambda chats list shows them)", file=sys.stderr)
        return EXIT_USAGE
    if args.output:
        print(export_conversation(store, args.id, args.output, args.format))
    elif args.format == "json":
        print(json.dumps(conversation_to_dict(store, args.id), ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(conversation_to_markdown(store, args.id))
    return EXIT_OK


__all__ = ["configure_parser", "run_chats"]
