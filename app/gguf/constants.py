"""Numbers the GGUF format fixes: value types, tensor types with their block layouts, file types.

Tensor type ids and block sizes follow ggml's enumeration; ids that ggml retired (4, 5, 31-33,
36-38) are absent on purpose, so a file that uses them is refused as unknown.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_ALIGNMENT = 1 << 20  # anything larger is not a real file
MAX_TENSOR_NAME = 63  # bytes; ggml keeps names in 64-byte fields with a terminating NUL
MAX_DIMS = 4


class ValueType(enum.IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# struct format and size of each fixed-size value type (little-endian)
SCALAR_FORMATS: dict[ValueType, tuple[str, int]] = {
    ValueType.UINT8: ("<B", 1),
    ValueType.INT8: ("<b", 1),
    ValueType.UINT16: ("<H", 2),
    ValueType.INT16: ("<h", 2),
    ValueType.UINT32: ("<I", 4),
    ValueType.INT32: ("<i", 4),
    ValueType.FLOAT32: ("<f", 4),
    ValueType.BOOL: ("<?", 1),
    ValueType.UINT64: ("<Q", 8),
    ValueType.INT64: ("<q", 8),
    ValueType.FLOAT64: ("<d", 8),
}

# numpy dtype of each fixed-size value type, for zero-copy arrays
NUMPY_DTYPES: dict[ValueType, str] = {
    ValueType.UINT8: "<u1",
    ValueType.INT8: "<i1",
    ValueType.UINT16: "<u2",
    ValueType.INT16: "<i2",
    ValueType.UINT32: "<u4",
    ValueType.INT32: "<i4",
    ValueType.FLOAT32: "<f4",
    ValueType.BOOL: "<u1",
    ValueType.UINT64: "<u8",
    ValueType.INT64: "<i8",
    ValueType.FLOAT64: "<f8",
}

INTEGER_TYPES = frozenset(
    {
        ValueType.UINT8,
        ValueType.INT8,
        ValueType.UINT16,
        ValueType.INT16,
        ValueType.UINT32,
        ValueType.INT32,
        ValueType.UINT64,
        ValueType.INT64,
    }
)
FLOAT_TYPES = frozenset({ValueType.FLOAT32, ValueType.FLOAT64})


@dataclass(frozen=True)
class TensorType:
    """One ggml tensor type: `block_size` elements are stored in `type_size` bytes."""

    id: int
    name: str
    block_size: int
    type_size: int

    def row_bytes(self, n: int) -> int:
        """Bytes of `n` elements; `n` must be a multiple of `block_size`."""
        return n // self.block_size * self.type_size


_TYPES = [
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 18),
    (3, "Q4_1", 32, 20),
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (8, "Q8_0", 32, 34),
    (9, "Q8_1", 32, 40),
    (10, "Q2_K", 256, 84),
    (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144),
    (13, "Q5_K", 256, 176),
    (14, "Q6_K", 256, 210),
    (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (39, "MXFP4", 32, 17),
]
TENSOR_TYPES: dict[int, TensorType] = {t[0]: TensorType(*t) for t in _TYPES}
TENSOR_TYPES_BY_NAME: dict[str, TensorType] = {t.name: t for t in TENSOR_TYPES.values()}

# general.file_type: what most of the tensors were quantized to
FILE_TYPES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}
