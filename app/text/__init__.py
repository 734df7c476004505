"""Text in and out of a model: tokenizers from GGUF metadata, a streaming detokenizer with stop
conditions, and chat templates rendered in a sandbox.
"""

from app.text.chat import (ChatTemplate, chat_prompt_tokens, chat_template_names, load_chat_template,
                           render_chat)
from app.text.cli import cli_tokenize, tokenize_json_lines
from app.text.stream import Detokenizer, StopMatcher, StreamStep, TextStream
from app.text.tokenizer import Tokenizer, load_tokenizer
from app.text.vocab import Vocab

__all__ = ["ChatTemplate", "chat_prompt_tokens", "chat_template_names", "load_chat_template", "render_chat",
           "cli_tokenize", "tokenize_json_lines", "Detokenizer", "StopMatcher", "StreamStep", "TextStream", "Tokenizer", "Vocab", "load_tokenizer"]
