"""The reader against real and synthetic files, with gguf (the llama.cpp authors' package) as oracle."""

from __future__ import annotations

import time

import gguf
import numpy as np
import pytest

from app.gguf import FILE_TYPES, TENSOR_TYPES, ValueType, open_gguf
from tests.synth import write_tiny_model


def test_tensor_type_table_matches_ggml():
    for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items():
        if qtype.value in TENSOR_TYPES:
            t = TENSOR_TYPES[qtype.value]
            assert (t.name, t.block_size, t.type_size) == (qtype.name, block, size)
    # every type we know is one ggml knows
    known = {q.value for q in gguf.GGML_QUANT_SIZES}
    assert set(TENSOR_TYPES) <= known


def test_file_type_names_match_ggml():
    for ft in gguf.LlamaFileType:
        if ft.value in FILE_TYPES:
            assert ft.name in (f"MOSTLY_{FILE_TYPES[ft.value]}", "ALL_F32")


def test_smollm2_facts(smollm2_path):
    with open_gguf(smollm2_path) as f:
        md = f.metadata
        assert f.version == 3
        assert md.string("general.architecture") == "llama"
        assert md.integer("llama.block_count") == 30
        assert md.string("tokenizer.ggml.model") == "gpt2"
        assert "tokenizer.chat_template" in md
        assert sum(t.type.name == "Q4_1" for t in f.tensors.values()) == 210
        assert len(md.string_array("tokenizer.ggml.tokens")) == 49152


def test_smollm2_tensors_match_oracle(smollm2_path):
    oracle = gguf.GGUFReader(str(smollm2_path))
    with open_gguf(smollm2_path) as f:
        assert len(f.tensors) == len(oracle.tensors)
        for ot in oracle.tensors:
            t = f.tensors[ot.name]
            assert t.type.id == int(ot.tensor_type)
            assert list(t.dims) == [int(d) for d in ot.shape]
            assert t.n_bytes == int(ot.n_bytes)
            assert t.offset == int(ot.data_offset)
        for name in ("blk.0.attn_q.weight", "output_norm.weight", "token_embd.weight"):
            ours = f.tensor_bytes(name)
            theirs = next(x for x in oracle.tensors if x.name == name).data
            assert np.array_equal(ours.reshape(-1), np.asarray(theirs).view(np.uint8).reshape(-1))
            assert not ours.flags.writeable and not ours.flags.owndata  # zero-copy, read-only
        md_oracle = {k: v for k, v in oracle.fields.items() if not k.startswith("GGUF.")}
        assert set(md_oracle) == set(f.metadata)


def test_every_value_type_round_trips(tmp_path):
    path = tmp_path / "types.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    values = {
        "t.u8": (w.add_uint8, 200, ValueType.UINT8),
        "t.i8": (w.add_int8, -100, ValueType.INT8),
        "t.u16": (w.add_uint16, 60000, ValueType.UINT16),
        "t.i16": (w.add_int16, -30000, ValueType.INT16),
        "t.u32": (w.add_uint32, 4_000_000_000, ValueType.UINT32),
        "t.i32": (w.add_int32, -2_000_000_000, ValueType.INT32),
        "t.f32": (w.add_float32, 1.5, ValueType.FLOAT32),
        "t.bool": (w.add_bool, True, ValueType.BOOL),
        "t.str": (w.add_string, "héllo ✓", ValueType.STRING),
        "t.u64": (w.add_uint64, 2**63 + 5, ValueType.UINT64),
        "t.i64": (w.add_int64, -(2**62), ValueType.INT64),
        "t.f64": (w.add_float64, 2.0**-40, ValueType.FLOAT64),
    }
    for key, (add, v, _) in values.items():
        add(key, v)
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_str", ["x", "", "zz"])
    w.add_array("t.arr_f32", [0.5, 0.25])
    w.add_tensor("x", np.arange(64, dtype=np.float32).reshape(2, 32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open_gguf(path) as f:
        md = f.metadata
        for key, (_, v, vtype) in values.items():
            assert md.type_of(key) == vtype
            assert md.get(key) == v
        assert md.type_of("t.arr_i32") == ValueType.ARRAY
        assert md.numeric_array("t.arr_i32").tolist() == [1, -2, 3]
        assert md.string_array("t.arr_str") == ["x", "", "zz"]
        assert md.numeric_array("t.arr_f32", "float").tolist() == [0.5, 0.25]
        assert np.array_equal(f.tensor_array("x"), np.arange(64, dtype=np.float32).reshape(2, 32))


def test_typed_accessors_name_the_key(tmp_path):
    p = write_tiny_model(tmp_path / "m.gguf")
    with open_gguf(p) as f:
        with pytest.raises(Exception, match="llama.block_count is UINT32, expected a string"):
            f.metadata.string("llama.block_count")
        with pytest.raises(Exception, match="no.such.key is missing"):
            f.metadata.integer("no.such.key")
        assert f.metadata.integer("no.such.key", 7) == 7


def test_big_vocabulary_parses_fast(tmp_path):
    """262,144 tokens + scores + types: opening stays well under half a second."""
    path = tmp_path / "bigvocab.gguf"
    n = 262_144
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list([f"tok{i}▁x" for i in range(n)])
    w.add_token_scores(np.linspace(0, -1, n, dtype=np.float32).tolist())
    w.add_token_types([1] * n)
    w.add_tensor("x", np.zeros(32, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    best = min(_time_open(path) for _ in range(3))
    assert best < 0.25, f"opening took {best:.3f} s"
    with open_gguf(path) as f:
        assert f.metadata.string_array("tokenizer.ggml.tokens")[n - 1] == f"tok{n - 1}▁x"


def _time_open(path) -> float:
    t = time.perf_counter()
    with open_gguf(path):
        pass
    return time.perf_counter() - t
