"""Text in and out of a model: tokenizers from GGUF metadata, a streaming detokenizer with stop
conditions, and chat templates rendered in a sandbox. Nothing here imports Qt or the engine.

    with open_gguf(path) as f:
        tok = load_tokenizer(f)                      # Tokenizer: encode / decode / eog_ids ...
        template = load_chat_template(f, tok)        # the model's template, or a fallback (warns)
    ids = chat_prompt_tokens(tok, template, messages)   # prompt ids, specials only where the template put them
    stream = TextStream(tok, stop_strings=["\\nUser:"])
    for token in generated:                           # one StreamStep per token
        step = stream.push(token); show(step.text)
        if step.stop: break
    show(stream.finish())                             # when generation ends for another reason
"""

from app.text.chat import ChatTemplate, chat_prompt_tokens, chat_template_names, load_chat_template, render_chat
from app.text.cli import cli_tokenize, tokenize_json_lines
from app.text.stream import Detokenizer, StopMatcher, StreamStep, TextStream
from app.text.tokenizer import Tokenizer, load_tokenizer
from app.text.vocab import Vocab

__all__ = [
    "ChatTemplate",
    "chat_prompt_tokens",
    "chat_template_names",
    "load_chat_template",
    "render_chat",
    "cli_tokenize",
    "tokenize_json_lines",
    "Detokenizer",
    "StopMatcher",
    "StreamStep",
    "TextStream",
    "Tokenizer",
    "Vocab",
    "load_tokenizer",
]
