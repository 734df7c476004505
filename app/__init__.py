"""Llambda: an offline chat app that runs GGUF language models on the CPU with its own engine.

The package is layered: gguf (file format) → kernels (compiled C) → model → text → engine →
library/chats → ui. Nothing below `app.ui` imports Qt.
"""

__version__ = "0.1.0"
