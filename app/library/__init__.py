"""The model library in the user cache folder, and the pre-flight check before a model loads.

`ModelLibrary().import_model(path, progress=..., cancel=...)`, `.list()`, `.resolve(name)`,
`.remove(name)`; `app.library.preflight.preflight(path_or_file, n_ctx)` says ok / warn / refuse with the numbers;
`app.library.inspect.describe(path)` is what `llambda inspect` shows.
"""

from app.library.index import ModelEntry
from app.library.library import (
    DuplicateModelError,
    ImportCancelled,
    ModelInfo,
    ModelLibrary,
    default_library,
    describe_model,
    resolve_model,
)

__all__ = [
    "ModelEntry",
    "ModelLibrary",
    "ModelInfo",
    "DuplicateModelError",
    "ImportCancelled",
    "default_library",
    "describe_model",
    "resolve_model",
]
