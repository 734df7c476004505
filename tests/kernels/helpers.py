"""Shared pieces of the kernel tests: named tolerances, ISA levels, oracle helpers.

Tolerances are in the spirit of ggml's own tests: a quantized dot product is
within 2% of the exact float product (normalized by |w| |x|), a matmul within NMSE 5e-4; SIMD
kernels agree with their reference twin far more tightly, since only float summation order differs.
"""

from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

import app.kernels as K

DOT_REL_ERR = 0.02  # |dot(q(w), q8(x)) - dot(w, x)| / (|w| |x|), quantized vs exact
MATMUL_NMSE = 5e-4  # mean((y - y_exact)^2) / mean(y_exact^2)
SIMD_VS_REF_REL = 2e-5  # |dot_simd - dot_ref| / (|w| |x|): same integers, other float order
FLOAT_OP_RTOL = 2e-5  # element-wise ops against numpy in float64
ATTN_ATOL = 2e-5

LEVELS = [name for i, name in enumerate(K.ISA_NAMES) if i <= K.best_isa_level()]
SIMD_LEVELS = LEVELS[1:]

# the grid types (IQ1/IQ2/IQ3), the ternary TQ1_0 / TQ2_0 and MXFP4
GRID_TYPES = [16, 17, 18, 19, 21, 22, 29, 34, 35, 39]
QUANT_TYPES = [2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23] + GRID_TYPES
FLOAT_TYPES = [0, 1, 30]
ALL_TYPES = FLOAT_TYPES + QUANT_TYPES
GGUF_QUANTIZABLE = [0, 1, 30, 2, 3, 6, 7, 8, 34, 35, 39]  # gguf.quants can quantize these itself


def name(t: int) -> str:
    return K.TYPE_NAMES[t]


def oracle_dequant(t: int, raw: np.ndarray, n: int) -> np.ndarray:
    """gguf.quants.dequantize of one row (float64)."""
    if t == 0:
        return np.frombuffer(raw.tobytes()[: 4 * n], dtype=np.float32).astype(np.float64)
    return dequantize(np.ascontiguousarray(raw[: K.row_bytes(t, n)]), T(t)).astype(np.float64).reshape(-1)


def unaligned(raw: np.ndarray, offset: int) -> np.ndarray:
    """A copy of raw's bytes starting `offset` bytes past a 64-byte boundary."""
    raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    buf = np.empty(raw.size + 128, dtype=np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    out = buf[start : start + raw.size]
    out[:] = raw
    return out


def norm_err(got: float, want: float, w: np.ndarray, x: np.ndarray) -> float:
    scale = float(np.linalg.norm(w) * np.linalg.norm(x)) or 1.0
    return abs(float(got) - float(want)) / scale
