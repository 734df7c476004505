"""Byte-exact GGUF files built by hand, so tests can break any field on purpose."""

from __future__ import annotations

import struct

from app.gguf.constants import ValueType

U32, U64 = struct.Struct("<I"), struct.Struct("<Q")


def gstr(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return U64.pack(len(b)) + b


def kv(key: str | bytes, vtype: int, payload: bytes) -> bytes:
    """One metadata entry; `payload` is the already-encoded value."""
    return gstr(key) + U32.pack(vtype) + payload


def kv_u32(key: str, v: int) -> bytes:
    return kv(key, ValueType.UINT32, U32.pack(v))


def kv_str(key: str, v: str | bytes) -> bytes:
    return kv(key, ValueType.STRING, gstr(v))


def kv_array(key: str, elem: int, count: int, body: bytes) -> bytes:
    return kv(key, ValueType.ARRAY, U32.pack(elem) + U64.pack(count) + body)


def tensor_info(name: str | bytes, dims: list[int], ttype: int, offset: int) -> bytes:
    return gstr(name) + U32.pack(len(dims)) + b"".join(U64.pack(d) for d in dims) + U32.pack(ttype) + U64.pack(offset)


def build(
    kvs: list[bytes] = (),
    tensors: list[bytes] = (),
    data: bytes = b"",
    *,
    version: int = 3,
    magic: bytes = b"GGUF",
    n_kv: int | None = None,
    n_tensors: int | None = None,
    alignment: int = 32,
) -> bytes:
    head = (
        magic
        + U32.pack(version)
        + U64.pack(len(tensors) if n_tensors is None else n_tensors)
        + U64.pack(len(kvs) if n_kv is None else n_kv)
    )
    body = head + b"".join(kvs) + b"".join(tensors)
    if data:
        body += b"\0" * (-len(body) % alignment) + data
    return body


def small_valid() -> bytes:
    """A small valid file: a few metadata kinds and two F32 tensors."""
    kvs = [
        kv_str("general.architecture", "llama"),
        kv_u32("general.alignment", 32),
        kv_array("tokenizer.ggml.tokens", ValueType.STRING, 3, gstr("a") + gstr("b") + gstr("c")),
        kv_array("tokenizer.ggml.scores", ValueType.FLOAT32, 3, struct.pack("<3f", 0, -1, -2)),
        kv("general.flag", ValueType.BOOL, b"\x01"),
    ]
    tensors = [tensor_info("a.weight", [8], 0, 0), tensor_info("b.weight", [4, 2], 0, 32)]
    data = struct.pack("<8f", *range(8)) + struct.pack("<8f", *range(8, 16))
    return build(kvs, tensors, data)
