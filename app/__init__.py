"""Llambda: an offline chat app that runs GGUF language models on the CPU with its own engine.

The package is layered; each package imports only packages before it in this order
(tests/test_layering.py checks that there is no cycle, lazy imports included):

    gguf (file format), kernels (compiled C) → model → text → chats → library → engine →
    server → ui → cli (the command line)

errors, units, paths, logs, defaults and diagnostics serve every layer. Nothing below `app.ui`
imports Qt.
"""

__version__ = "0.1.0"
