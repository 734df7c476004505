"""GGUF model files: a strict reader (`open_gguf`) and the format's constants.

Open a file with `with open_gguf(path) as f:`; read metadata through `f.metadata` (typed
accessors name the key on failure) and tensor bytes through `f.tensor_bytes(name)`. Metadata
arrays are decoded lazily, so read them while the file is open.
"""

from app.gguf.constants import FILE_TYPES, TENSOR_TYPES, TENSOR_TYPES_BY_NAME, TensorType, ValueType
from app.gguf.reader import GGUFFile, Metadata, TensorInfo, open_gguf

__all__ = [
    "FILE_TYPES",
    "TENSOR_TYPES",
    "TENSOR_TYPES_BY_NAME",
    "TensorType",
    "ValueType",
    "GGUFFile",
    "Metadata",
    "TensorInfo",
    "open_gguf",
]
