"""The tensor-type table is declared once on the Python side (app.gguf.constants) and once in C
(the llk_type enum in kernels/llk.h, the block table in kernels/llk_dispatch.c); these hold the
two together, and the Python one to llama.cpp's own `gguf` package."""

from __future__ import annotations

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

import app.kernels as K
from app.gguf.constants import TENSOR_TYPES, TENSOR_TYPES_BY_NAME

LLK_TYPES = {name[len("LLK_TYPE_") :]: getattr(K.lib, name) for name in dir(K.lib) if name.startswith("LLK_TYPE_")}


def test_every_c_type_has_the_python_id_name_and_block():
    assert len(LLK_TYPES) >= 20
    for name, type_id in LLK_TYPES.items():
        t = TENSOR_TYPES_BY_NAME[name]
        assert t.id == type_id, name
        assert (K.lib.llk_type_block_size(type_id), K.lib.llk_type_block_bytes(type_id)) == (
            t.block_size,
            t.type_size,
        ), name
        assert K.block_size(type_id) == t.block_size
        assert K.lib.llk_row_bytes(type_id, 4 * t.block_size) == t.row_bytes(4 * t.block_size), name


def test_the_kernels_names_are_the_c_types_named_from_the_python_table():
    known = {t for t in range(64) if K.lib.llk_type_block_size(t)}  # the C dispatch table's ids
    assert set(K.TYPE_NAMES) == known == set(LLK_TYPES.values())
    assert K.TYPE_NAMES == {i: n for n, i in LLK_TYPES.items()}
    assert K.SUPPORTED_TYPES <= known


def test_the_python_table_is_llama_cpp_s():
    for t in TENSOR_TYPES.values():
        assert GGMLQuantizationType(t.id).name == t.name
        assert GGML_QUANT_SIZES[GGMLQuantizationType(t.id)] == (t.block_size, t.type_size), t.name
