"""Conversations and settings, stored in the user data folder (never the cache).

`ChatStore()` opens (and creates or migrates) the SQLite database; `app.chats.export` writes a
conversation to Markdown or JSON; `app.chats.settings` holds the defaults and reads settings
from the store.
"""

from app.chats.export import conversation_to_dict, conversation_to_markdown, export_json, export_markdown
from app.chats.settings import ENGINE_DEFAULTS, SAMPLING_DEFAULTS, engine_settings, sampling_defaults
from app.chats.store import ChatStore, Conversation, Message, SearchHit

__all__ = [
    "ChatStore",
    "Conversation",
    "Message",
    "SearchHit",
    "conversation_to_dict",
    "conversation_to_markdown",
    "export_json",
    "export_markdown",
    "ENGINE_DEFAULTS",
    "SAMPLING_DEFAULTS",
    "engine_settings",
    "sampling_defaults",
]
