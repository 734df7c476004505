"""What to do about an error, in plain words: the precise reason stays as it is, and this adds
the next step a person can take ("download it again", "choose a smaller quantization"...).

`advice_for(reason)` looks at the one-line reason the layers below give and returns one or two
sentences, or "" when there is nothing useful to add. No Qt here (tested on its own).
"""

from __future__ import annotations

import re


def _runnable_architectures() -> str:
    try:
        from app.model.config import (
            ARCHITECTURES,
        )  # lazy: numpy; the window starts without it, and a failure only drops the list

        names = sorted(n for n, spec in ARCHITECTURES.items() if spec.runnable)
        return ", ".join(names)
    except Exception:
        return ""


def _runnable_types() -> str:
    try:
        from app.gguf.constants import TENSOR_TYPES  # lazy: as in _runnable_architectures
        from app.model.support import runnable_tensor_types

        ids = runnable_tensor_types() or ()
        return ", ".join(TENSOR_TYPES[i].name for i in sorted(ids) if i in TENSOR_TYPES)
    except Exception:
        return ""


DAMAGED = (
    "The file is damaged or incomplete — a download that stopped early looks like this. "
    "Download it again (and compare its SHA-256 with the one the site lists, if it gives one)."
)

# (pattern in the reason, advice); the first match wins. Advice may be a callable for lists that
# come from the engine itself.
RULES: list[tuple[str, object]] = [
    (r"no display|cannot open the window", "Run Llambda on a desktop, or use the command line: llambda chat MODEL."),
    (
        r"architecture '?[\w.-]+'? is not supported",
        lambda: (
            "This kind of model is not supported yet. Models Llambda runs today: "
            + (_runnable_architectures() or "see llambda inspect")
            + "."
        ),
    ),
    (
        r"tensor type \w+ is not supported",
        lambda: (
            "This quantization is not supported yet: pick another file of the same model. Supported types: "
            + (_runnable_types() or "see llambda inspect")
            + "."
        ),
    ),
    (
        r"tokenizer model .* is not supported|carries no tokenizer",
        "The file's tokenizer is of a kind Llambda cannot read yet: try another conversion of the same model.",
    ),
    (
        r"not enough free disk space",
        "Free some disk space, or import the model where it is (Models → Use where it is) so it is not copied.",
    ),
    (
        r"does not have enough|more memory|out of memory|needs \d[\d,.]* ?[KMG]?B of memory",
        "Close other programs, choose a smaller quantization of the model (Q4 instead of Q8, say), "
        "or lower the context length in Settings.",
    ),
    (
        r"permission denied|not permitted",
        "Llambda may not read this file: check its permissions, or copy it somewhere in your home folder first.",
    ),
    (
        r"no such file|the model file is gone|not found",
        "The file was moved or deleted: open it from where it is now, or import it again.",
    ),
    (
        r"changed on disk since it was loaded",
        "Another program truncated or rewrote the model file while Llambda was using it. Load the model "
        "again once that program is done (a copy or download still running looks like this).",
    ),
    (
        r"has changed since it was imported|changed while it was being imported",
        "The file changed on disk after it was added: import it again.",
    ),
    (
        r"not a gguf file|wrong magic|magic|truncated|past the end|shorter than|bytes left|unexpected end|"
        r"not a regular file|is empty|version \d+ is not|malformed|corrupt|out of range",
        DAMAGED,
    ),
    (
        r"chat template",
        "The model's own chat template cannot be used; Llambda falls back to a generic one, "
        "which works for most models. Another conversion of the model may carry a working template.",
    ),
    (r"context", "Start a new chat, or raise the context length in Settings (it costs memory)."),
    (r"kernel library is not built|reinstall", "Reinstall Llambda: its compiled part is missing."),
]


def advice_for(reason: str) -> str:
    """The next step for `reason` in plain words, or "" when there is nothing better to say."""
    low = reason.lower()
    for pattern, advice in RULES:
        if re.search(pattern, low):
            return advice() if callable(advice) else str(advice)
    return ""


__all__ = ["advice_for", "DAMAGED"]
