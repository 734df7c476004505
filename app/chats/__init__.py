"""Conversations and settings, stored in the user data folder (never the cache).

`ChatStore()` opens (and creates or migrates) the SQLite database; `app.chats.export` writes a
conversation to Markdown or JSON; `app.chats.settings` loads and saves the settings file.
"""

from app.chats.export import conversation_to_dict, conversation_to_markdown, export_json, export_markdown
from app.chats.settings import SamplingDefaults, Settings, load_settings, save_settings, update_settings
from app.chats.store import ChatStore, Conversation, Message, SearchHit

__all__ = ["ChatStore", "Conversation", "Message", "SearchHit", "conversation_to_dict",
           "conversation_to_markdown", "export_json", "export_markdown", "Settings",
           "SamplingDefaults", "load_settings", "save_settings", "update_settings"]
