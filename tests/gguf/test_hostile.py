"""Hostile-input cases 1-12 (magic and version, counts, strings, arrays, keys, tensors, offsets,
alignment, truncation, metadata types, hyper-parameters): each malformed file is refused with one
clear line.

Every refusal is a ModelFormatError (exit code 3 on the command line); no other exception,
no hang, no allocation in proportion to a lying count.
"""

from __future__ import annotations

import struct

import gguf
import numpy as np
import pytest

from app.errors import ModelFormatError
from app.gguf import ValueType, open_gguf
from app.model import check_tokenizer_metadata, config_from_gguf, support_verdict
from tests.gguf.craft import build, gstr, kv, kv_array, kv_str, kv_u32, small_valid, tensor_info
from tests.synth import TinySpec, write_tiny_model

U32, U64 = struct.Struct("<I"), struct.Struct("<Q")
HUGE = 2**64 - 1
ARCH = kv_str("general.architecture", "llama")


def refused(tmp_path, data: bytes, match: str) -> str:
    p = tmp_path / "bad.gguf"
    p.write_bytes(data)
    with pytest.raises(ModelFormatError, match=match) as e:
        with open_gguf(p):
            pass
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg
    return msg


def test_small_valid_file_parses(tmp_path):
    p = tmp_path / "ok.gguf"
    p.write_bytes(small_valid())
    with open_gguf(p) as f:
        assert f.metadata.string_array("tokenizer.ggml.tokens") == ["a", "b", "c"]
        assert f.tensor_array("b.weight").tolist() == [[8, 9, 10, 11], [12, 13, 14, 15]]


# --- case 1: magic and version ----------------------------------------------------------------


@pytest.mark.parametrize(
    "data, match",
    [
        (b"GGML" + small_valid()[4:], "not a GGUF file"),
        (b"\0" * 64, "not a GGUF file"),
        (build([ARCH], version=0), "unsupported GGUF version 0"),
        (build([ARCH], version=1), "version 1 is too old"),
        (build([ARCH], version=4), "unsupported GGUF version 4"),
        (build([ARCH], version=0x03000000), "big-endian"),
        (build([ARCH], version=0x02000000), "big-endian"),
        (b"", "empty"),
        (b"GGUF\x03\0\0", "truncated"),
    ],
)
def test_case1_magic_and_version(tmp_path, data, match):
    refused(tmp_path, data, match)


# --- case 2: counts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_kv, n_tensors, match",
    [
        (HUGE, 0, "metadata count"),
        (2**63, 0, "metadata count"),
        (0, HUGE, "tensor count"),
        (1000, 0, "metadata count"),
        (1, 1000, "tensor count"),
    ],
)
def test_case2_counts(tmp_path, n_kv, n_tensors, match):
    refused(tmp_path, build([ARCH], n_kv=n_kv, n_tensors=n_tensors), match)


# --- case 3: strings ---------------------------------------------------------------------------


def test_case3_string_lengths(tmp_path):
    bad_len = U64.pack(HUGE) + b"general.name"
    refused(tmp_path, build([bad_len + U32.pack(8) + gstr("x")]), "string of")
    refused(tmp_path, build([kv("general.name", ValueType.STRING, U64.pack(2**62) + b"abc")]), "string of")
    refused(tmp_path, build([kv("general.name", ValueType.STRING, U64.pack(100) + b"abc")]), "string of 100 bytes")


# --- case 4: arrays ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry, match",
    [
        (kv_array("a", ValueType.UINT64, HUGE, b""), "array a of"),
        (kv_array("a", ValueType.UINT64, 2**61, b""), "array a of"),  # count * 8 wraps in 64 bits
        (kv_array("a", ValueType.STRING, HUGE, b""), "array a of"),
        (kv_array("a", ValueType.STRING, 2, gstr("x") + U64.pack(2**63) + b"\0" * 16), "string 1 of"),
        (kv_array("a", ValueType.ARRAY, 1, U32.pack(ValueType.UINT8) + U64.pack(1) + b"\0"), "nested arrays"),
        (kv_array("a", 13, 1, b"\0" * 8), "unknown value type 13"),
        (kv("a", 13, b"\0" * 8), "unknown value type 13"),
        (kv("a", 0xFFFFFFFF, b"\0" * 8), "unknown value type"),
    ],
)
def test_case4_arrays_and_types(tmp_path, entry, match):
    refused(tmp_path, build([ARCH, entry]), match)


# --- case 5: keys and text ---------------------------------------------------------------------


def test_case5_keys(tmp_path):
    refused(tmp_path, build([kv_u32("", 1)]), "empty key")
    refused(tmp_path, build([kv_u32("a.b", 1), kv_u32("a.b", 2)]), "duplicate metadata key 'a.b'")
    refused(tmp_path, build([kv(b"\xff\xfe", ValueType.UINT32, U32.pack(1))]), "not UTF-8")


def test_case5_invalid_utf8_value_is_replaced(tmp_path):
    p = tmp_path / "v.gguf"
    p.write_bytes(build([kv_str("general.name", b"ab\xffcd\xc3")]))
    with open_gguf(p) as f:
        assert f.metadata.string("general.name") == "ab\ufffdcd\ufffd"


# --- case 6 and 7: tensor descriptors ----------------------------------------------------------


@pytest.mark.parametrize(
    "info, match",
    [
        (tensor_info("t", [], 0, 0), "0 dimensions"),
        (tensor_info("t", [1, 1, 1, 1, 1], 0, 0), "5 dimensions"),
        (tensor_info("t", [4, 0], 0, 0), "dimension of 0"),
        (tensor_info("t", [2**63], 0, 0), "dimension of"),
        (tensor_info("t", [2**32, 2**32, 2**32], 0, 0), "too many"),
        (tensor_info("t", [33], 2, 0), "not a multiple of the Q4_0 block size 32"),
        (tensor_info("t", [32], 4, 0), "unknown type id 4"),
        (tensor_info("t", [32], 99, 0), "unknown type id 99"),
        (tensor_info("t" * 64, [32], 0, 0), "64 bytes"),
        (tensor_info("", [32], 0, 0), "empty name"),
    ],
)
def test_case6_7_tensor_descriptors(tmp_path, info, match):
    refused(tmp_path, build([ARCH], [info], b"\0" * 256), match)


def test_case7_duplicate_tensor_names(tmp_path):
    infos = [tensor_info("t", [8], 0, 0), tensor_info("t", [8], 0, 32)]
    refused(tmp_path, build([ARCH], infos, b"\0" * 64), "duplicate tensor name 't'")


# --- case 8: data offsets ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "offsets, data_len, match",
    [
        ([4, 64], 128, "not a multiple of the alignment"),
        ([0, 0], 128, "overlaps"),
        ([64, 0], 128, "overlaps or comes before"),
        ([0, 32 * 100], 128, "truncated or damaged"),
        ([0, 2**63], 128, "truncated or damaged"),
        ([0, 32], 40, "truncated or damaged"),
    ],
)
def test_case8_offsets(tmp_path, offsets, data_len, match):
    infos = [tensor_info("a", [8], 0, offsets[0]), tensor_info("b", [8], 0, offsets[1])]
    refused(tmp_path, build([ARCH], infos, b"\0" * data_len), match)


# --- case 9: alignment -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry, match",
    [
        (kv_u32("general.alignment", 0), "not a power of two"),
        (kv_u32("general.alignment", 48), "not a power of two"),
        (kv_u32("general.alignment", 2**31), "not a power of two"),
        (kv("general.alignment", ValueType.UINT64, U64.pack(32)), "expected UINT32"),
        (kv_str("general.alignment", "32"), "expected UINT32"),
    ],
)
def test_case9_alignment(tmp_path, entry, match):
    refused(tmp_path, build([ARCH, entry]), match)


# --- case 10: truncation at every byte ---------------------------------------------------------


def test_case10_truncation_sweep_small_file(tmp_path):
    data = small_valid()
    p = tmp_path / "t.gguf"
    for n in range(len(data)):
        p.write_bytes(data[:n])
        with pytest.raises(ModelFormatError):
            with open_gguf(p):
                pass


def test_case10_truncation_sweep_model_header(tmp_path):
    """Every cut inside the metadata and tensor table of a real-shaped model, and a sample after."""
    src = write_tiny_model(tmp_path / "m.gguf", TinySpec(n_layer=1, n_embd=32, n_ff=64))
    data = src.read_bytes()
    with open_gguf(src) as f:
        header_end = f.data_offset
    p = tmp_path / "t.gguf"
    cuts = list(range(header_end + 1)) + list(range(header_end, len(data), 997))
    for n in cuts:
        p.write_bytes(data[:n])
        with pytest.raises(ModelFormatError):
            with open_gguf(p):
                pass


# --- case 11: metadata of the wrong type where the engine expects another ----------------------


def _tiny(tmp_path, **extra):
    return write_tiny_model(tmp_path / "m.gguf", TinySpec(n_layer=1, n_embd=32, n_ff=64), extra_metadata=extra)


@pytest.mark.parametrize(
    "extra, match",
    [
        (
            {"tokenizer.ggml.scores": ([1, 2, 3], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT8)},
            "scores is ARRAY of INT8, expected an ARRAY of FLOAT32",
        ),
        (
            {"tokenizer.ggml.token_type": ([1, 1, 1], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)},
            "token_type has 3 entries",
        ),
        (
            {"tokenizer.ggml.tokens": (["a", "b"], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.STRING)},
            "tokens has 2 entries but token_embd.weight has",
        ),
        ({"tokenizer.ggml.eos_token_id": (10**6, gguf.GGUFValueType.UINT32)}, "outside the vocabulary"),
        ({"tokenizer.ggml.bos_token_id": (-5, gguf.GGUFValueType.INT32)}, "outside the vocabulary"),
        ({"tokenizer.ggml.model": (7, gguf.GGUFValueType.UINT32)}, "tokenizer.ggml.model is UINT32, expected a string"),
        ({"tokenizer.ggml.tokens": ("abc", gguf.GGUFValueType.STRING)}, "expected an array of strings"),
        (
            {"llama.block_count": ("thirty", gguf.GGUFValueType.STRING)},
            "llama.block_count is STRING, expected an integer",
        ),
    ],
)
def test_case11_wrong_metadata_types(tmp_path, extra, match):
    p = _tiny(tmp_path, **extra)
    with open_gguf(p) as f, pytest.raises(ModelFormatError, match=match):
        check_tokenizer_metadata(f)
        config_from_gguf(f)
        support_verdict(f)


# --- case 12: absurd hyper-parameters ----------------------------------------------------------


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("llama.context_length", 10**12, r"context_length is 1000000000000.*KV cache alone would need .*TB"),
        ("llama.embedding_length", 10**12, "embedding_length is 1000000000000"),
        ("llama.block_count", 10**9, "block_count is 1000000000"),
        ("llama.attention.head_count", 0, "head_count is 0"),
        ("llama.feed_forward_length", 10**12, "feed_forward_length"),
    ],
)
def test_case12_absurd_hyperparameters(tmp_path, key, value, match):
    p = _tiny(tmp_path, **{key: (value, gguf.GGUFValueType.UINT64)})
    with open_gguf(p) as f, pytest.raises(ModelFormatError, match=match):
        config_from_gguf(f)


def test_tensor_views_are_read_only(tmp_path):
    p = tmp_path / "ok.gguf"
    p.write_bytes(small_valid())
    with open_gguf(p) as f:
        v = f.tensor_array("a.weight")
        with pytest.raises(ValueError):
            v[0] = 1
        assert np.shares_memory(v, f.tensor_bytes("a.weight"))


@pytest.mark.parametrize(
    "key, value",
    [
        ("llama.rope.freq_base", float("nan")),
        ("llama.rope.freq_base", -1.0),
        ("llama.rope.scaling.factor", 0.0),
        ("llama.attention.layer_norm_rms_epsilon", float("inf")),
        ("llama.final_logit_softcapping", float("nan")),
    ],
)
def test_case12_non_finite_hyperparameters(tmp_path, key, value):
    p = _tiny(tmp_path, **{key: (value, gguf.GGUFValueType.FLOAT32)})
    with open_gguf(p) as f, pytest.raises(ModelFormatError, match=key.split(".", 1)[1]):
        config_from_gguf(f)
