"""Text in and out of a model: tokenizers from GGUF metadata, a streaming detokenizer with stop
conditions, and chat templates rendered in a sandbox.
"""

from app.text.tokenizer import Tokenizer, load_tokenizer
from app.text.vocab import Vocab

__all__ = ["Tokenizer", "Vocab", "load_tokenizer"]
