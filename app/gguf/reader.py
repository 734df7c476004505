"""A strict GGUF reader: every count and length is checked before it is trusted.

The format, in short (all integers little-endian):

    header    "GGUF" magic, u32 version (2 or 3), u64 tensor count, u64 metadata count
    metadata  that many (key, value) pairs: key is a string (u64 byte length + UTF-8 bytes),
              then a u32 value type and the value. Scalars are stored raw; a string is length +
              bytes; an array is u32 element type, u64 count, then the elements back to back.
    tensors   that many descriptors: name string, u32 n_dims, n_dims × u64 dimensions (the
              first one is the row length), u32 ggml type, u64 offset into the data region
    padding   up to a multiple of `general.alignment` (default 32)
    data      the tensor bytes; each offset is a multiple of the alignment

Nothing here allocates in proportion to a count read from the file before that count has been
held against the bytes that remain. Tensor data is never read at open: it is exposed as
read-only numpy views over one memory map. Arrays in the metadata are walked at open (to find
where they end) but decoded only when asked for.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
from dataclasses import dataclass
from typing import Any, Iterator, KeysView

import numpy as np

from app.errors import ModelFileChangedError, ModelFormatError
from app.gguf.constants import (
    DEFAULT_ALIGNMENT,
    FLOAT_TYPES,
    GGUF_MAGIC,
    INTEGER_TYPES,
    MAX_ALIGNMENT,
    MAX_DIMS,
    MAX_TENSOR_NAME,
    NUMPY_DTYPES,
    SCALAR_FORMATS,
    TENSOR_TYPES,
    TensorType,
    ValueType,
)

HEADER_BYTES = 4 + 4 + 8 + 8
MIN_KV_BYTES = 8 + 1 + 4 + 1  # key length, one key byte, value type, a one-byte value
MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8  # name length, one name byte, n_dims, one dim, type, offset
MAX_ELEMENTS = (1 << 63) - 1

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


@dataclass(frozen=True)
class ArrayValue:
    """An array in the metadata, located but not yet decoded."""

    elem_type: ValueType
    count: int
    start: int  # file offset of the first element
    end: int  # file offset one past the last element


@dataclass(frozen=True)
class TensorInfo:
    """One tensor descriptor. `dims` are in GGUF order: dims[0] is the row length."""

    name: str
    dims: tuple[int, ...]
    type: TensorType
    offset: int  # absolute file offset of the first byte
    n_elements: int
    n_bytes: int

    @property
    def n_rows(self) -> int:
        return self.n_elements // self.dims[0]

    @property
    def row_bytes(self) -> int:
        return self.type.row_bytes(self.dims[0])

    @property
    def shape(self) -> tuple[int, ...]:
        """numpy (row-major) order: the row length last."""
        return tuple(reversed(self.dims))


class _Cursor:
    """Reads little-endian values from a buffer, refusing to step past its end."""

    def __init__(self, buf: mmap.mmap, size: int, where: str) -> None:
        self.buf = buf
        self.size = size
        self.pos = 0
        self.where = where

    def fail(self, message: str) -> ModelFormatError:
        return ModelFormatError(f"{self.where}: {message}")

    def need(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            raise self.fail(f"truncated: {what} needs {n} bytes at offset {self.pos}, {self.size - self.pos} left")

    def u32(self, what: str) -> int:
        self.need(4, what)
        v = _U32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def u64(self, what: str) -> int:
        self.need(8, what)
        v = _U64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def raw_string(self, what: str) -> bytes:
        n = self.u64(f"length of {what}")
        if n > self.size - self.pos:
            raise self.fail(f"{what}: string of {n} bytes at offset {self.pos}, {self.size - self.pos} left")
        b = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return b

    def scalar(self, vtype: ValueType, what: str) -> Any:
        fmt, size = SCALAR_FORMATS[vtype]
        self.need(size, what)
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += size
        return v


def _value_type(code: int, cur: _Cursor, what: str) -> ValueType:
    try:
        return ValueType(code)
    except ValueError:
        raise cur.fail(f"{what} has unknown value type {code}") from None


class Metadata:
    """The key/value pairs of a GGUF file, with typed accessors that name the key on failure."""

    def __init__(self, buf: mmap.mmap, where: str) -> None:
        self._buf = buf
        self._where = where
        self._types: dict[str, ValueType] = {}
        self._values: dict[str, Any] = {}  # scalars and strings decoded; arrays as ArrayValue
        self._decoded: dict[str, Any] = {}

    # -- building (reader only) -------------------------------------------------------------

    def _add(self, key: str, vtype: ValueType, value: Any) -> None:
        self._types[key] = vtype
        self._values[key] = value

    # -- plain mapping access ---------------------------------------------------------------

    def __contains__(self, key: object) -> bool:
        return key in self._types

    def __iter__(self) -> Iterator[str]:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)

    def keys(self) -> KeysView[str]:
        return self._types.keys()

    def type_of(self, key: str) -> ValueType:
        return self._types[key]

    def array_info(self, key: str) -> ArrayValue | None:
        v = self._values.get(key)
        return v if isinstance(v, ArrayValue) else None

    def get(self, key: str, default: Any = None) -> Any:
        """The value as Python data: scalars, str, numpy arrays (zero-copy) or lists of str."""
        if key not in self._types:
            return default
        v = self._values[key]
        if not isinstance(v, ArrayValue):
            return v
        if key not in self._decoded:
            self._decoded[key] = self._decode_array(v)
        return self._decoded[key]

    def __getitem__(self, key: str) -> Any:
        if key not in self._types:
            raise KeyError(key)
        return self.get(key)

    def _decode_array(self, a: ArrayValue) -> list[str] | np.ndarray:
        if a.elem_type == ValueType.STRING:
            buf, pos, out = self._buf, a.start, []
            unpack = _U64.unpack_from
            for _ in range(a.count):
                n = unpack(buf, pos)[0]
                pos += 8
                out.append(bytes(buf[pos : pos + n]).decode("utf-8", "replace"))
                pos += n
            return out
        arr = np.frombuffer(self._buf, dtype=NUMPY_DTYPES[a.elem_type], count=a.count, offset=a.start)
        return arr.astype(bool) if a.elem_type == ValueType.BOOL else arr

    # -- typed accessors ---------------------------------------------------------------------

    def _fail(self, key: str, expected: str) -> ModelFormatError:
        t = self._types[key]
        if t == ValueType.ARRAY:
            t_name = f"ARRAY of {self._values[key].elem_type.name}"
        else:
            t_name = t.name
        return ModelFormatError(f"{self._where}: metadata {key} is {t_name}, expected {expected}")

    _MISSING = object()

    def _missing(self, key: str, default: Any) -> Any:
        if default is Metadata._MISSING:
            raise ModelFormatError(f"{self._where}: metadata {key} is missing")
        return default

    def string(self, key: str, default: Any = _MISSING) -> str:
        if key not in self._types:
            return self._missing(key, default)
        if self._types[key] != ValueType.STRING:
            raise self._fail(key, "a string")
        return self._values[key]

    def integer(self, key: str, default: Any = _MISSING) -> int:
        if key not in self._types:
            return self._missing(key, default)
        if self._types[key] not in INTEGER_TYPES:
            raise self._fail(key, "an integer")
        return int(self._values[key])

    def number(self, key: str, default: Any = _MISSING) -> float:
        if key not in self._types:
            return self._missing(key, default)
        if self._types[key] not in INTEGER_TYPES | FLOAT_TYPES:
            raise self._fail(key, "a number")
        return float(self._values[key])

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        if key not in self._types:
            return self._missing(key, default)
        if self._types[key] != ValueType.BOOL:
            raise self._fail(key, "a boolean")
        return bool(self._values[key])

    def string_array(self, key: str, default: Any = _MISSING) -> list[str]:
        if key not in self._types:
            return self._missing(key, default)
        a = self.array_info(key)
        if a is None or a.elem_type != ValueType.STRING:
            raise self._fail(key, "an array of strings")
        return self.get(key)

    def numeric_array(self, key: str, kind: str = "int", default: Any = _MISSING) -> np.ndarray:
        """An array of integers (`kind="int"`) or of numbers of any kind (`kind="float"`)."""
        if key not in self._types:
            return self._missing(key, default)
        allowed = INTEGER_TYPES if kind == "int" else INTEGER_TYPES | FLOAT_TYPES
        a = self.array_info(key)
        if a is None or a.elem_type not in allowed:
            raise self._fail(key, "an array of integers" if kind == "int" else "an array of numbers")
        return self.get(key)

    def integer_or_array(self, key: str, default: Any = _MISSING) -> int | np.ndarray:
        """Keys like `head_count_kv` may hold one integer or one per layer."""
        if key not in self._types:
            return self._missing(key, default)
        if self._types[key] == ValueType.ARRAY:
            return self.numeric_array(key, "int")
        return self.integer(key)

    def array_length(self, key: str) -> int | None:
        a = self.array_info(key)
        return None if a is None else a.count


class GGUFFile:
    """An open GGUF file: header facts, `metadata`, `tensors`, and zero-copy tensor views.

    Use as a context manager or call `close()`. Views returned by `tensor_bytes` keep the
    memory map alive while they exist.

    `full_size`: the file at `path` holds only the first bytes of a GGUF file of that many bytes
    (a header fetched with a range request). Metadata and tensor descriptors are read and checked
    as usual against the bytes at hand; tensor data offsets are checked against `full_size`, and
    tensor data cannot be read.
    """

    def __init__(self, path: str | os.PathLike, *, full_size: int | None = None):
        self.path = os.fspath(path)
        self.full_size = full_size
        where = self.path
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except FileNotFoundError:
            raise ModelFormatError(f"{where}: no such file") from None
        except IsADirectoryError:
            raise ModelFormatError(f"{where}: is a folder, not a model file") from None
        except OSError as e:
            raise ModelFormatError(f"{where}: cannot open: {e.strerror or e}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ModelFormatError(f"{where}: not a regular file")
            self.file_size = st.st_size
            if self.file_size == 0:
                raise ModelFormatError(f"{where}: file is empty")
            if full_size is not None and full_size < self.file_size:
                raise ModelFormatError(
                    f"{where}: holds {self.file_size} bytes, more than the {full_size} of the whole file"
                )
            if self.file_size < HEADER_BYTES:
                raise ModelFormatError(
                    f"{where}: truncated: {self.file_size} bytes, a GGUF header needs {HEADER_BYTES}"
                )
            try:
                self._mmap = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as e:
                raise ModelFormatError(f"{where}: cannot map file: {e}") from None
        except BaseException:
            os.close(fd)
            raise
        # The descriptor stays open while the file is: fstat on it tells whether the mapped file
        # (this inode, wherever its name went) was truncated or rewritten (check_unchanged).
        self._fd = fd
        self._dev_ino = (st.st_dev, st.st_ino)
        self._mtime_ns = st.st_mtime_ns
        try:
            self._parse(where)
        except BaseException:
            self.close()
            raise

    # -- parsing ------------------------------------------------------------------------------

    def _parse(self, where: str) -> None:
        cur = _Cursor(self._mmap, self.file_size, where)
        magic = bytes(self._mmap[0:4])
        if magic != GGUF_MAGIC:
            raise cur.fail(f"not a GGUF file (starts with {magic!r}, expected b'GGUF')")
        cur.pos = 4
        version = cur.u32("version")
        if version not in (2, 3):
            swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
            if swapped in (1, 2, 3):
                raise cur.fail("big-endian GGUF file; only little-endian files are supported")
            if version == 1:
                raise cur.fail("GGUF version 1 is too old; convert the model again with a current tool")
            raise cur.fail(f"unsupported GGUF version {version} (supported: 2 and 3)")
        self.version = version
        n_tensors = cur.u64("tensor count")
        n_kv = cur.u64("metadata count")
        remaining = self.file_size - cur.pos
        if n_kv > remaining // MIN_KV_BYTES:
            raise cur.fail(f"truncated or damaged: metadata count {n_kv} cannot fit in the {remaining} bytes left")
        if n_tensors > remaining // MIN_TENSOR_INFO_BYTES:
            raise cur.fail(f"truncated or damaged: tensor count {n_tensors} cannot fit in the {remaining} bytes left")

        self.metadata = md = Metadata(self._mmap, where)
        for i in range(n_kv):
            key_pos = cur.pos
            raw = cur.raw_string(f"key of metadata entry {i}")
            if not raw:
                raise cur.fail(f"metadata entry {i} at offset {key_pos} has an empty key")
            try:
                key = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise cur.fail(f"metadata entry {i} at offset {key_pos} has a key that is not UTF-8") from None
            if key in md:
                raise cur.fail(f"duplicate metadata key {key!r}")
            vtype = _value_type(cur.u32(f"type of {key}"), cur, f"metadata {key}")
            md._add(key, vtype, self._read_value(cur, vtype, key))

        self.alignment = DEFAULT_ALIGNMENT
        if "general.alignment" in md:
            if md.type_of("general.alignment") != ValueType.UINT32:
                raise cur.fail(f"general.alignment is {md.type_of('general.alignment').name}, expected UINT32")
            a = md.get("general.alignment")
            if a == 0 or a & (a - 1) or a > MAX_ALIGNMENT:
                raise cur.fail(f"general.alignment {a} is not a power of two between 1 and {MAX_ALIGNMENT}")
            self.alignment = a

        infos: list[tuple[str, tuple[int, ...], TensorType, int, int, int]] = []
        names: set[str] = set()
        for i in range(n_tensors):
            raw = cur.raw_string(f"name of tensor {i}")
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise cur.fail(f"tensor {i} has a name that is not UTF-8") from None
            if not raw:
                raise cur.fail(f"tensor {i} has an empty name")
            if len(raw) > MAX_TENSOR_NAME:
                raise cur.fail(f"tensor {i} name is {len(raw)} bytes, at most {MAX_TENSOR_NAME} allowed")
            if name in names:
                raise cur.fail(f"duplicate tensor name {name!r}")
            names.add(name)
            n_dims = cur.u32(f"n_dims of tensor {name}")
            if n_dims == 0 or n_dims > MAX_DIMS:
                raise cur.fail(f"tensor {name} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)")
            dims = tuple(cur.u64(f"dimension of tensor {name}") for _ in range(n_dims))
            n_elements = 1
            for d in dims:
                if d == 0 or d > MAX_ELEMENTS:
                    raise cur.fail(f"tensor {name} has a dimension of {d}")
                n_elements *= d
            if n_elements > MAX_ELEMENTS:
                raise cur.fail(f"tensor {name} has {n_elements} elements, too many")
            type_id = cur.u32(f"type of tensor {name}")
            ttype = TENSOR_TYPES.get(type_id)
            if ttype is None:
                raise cur.fail(f"tensor {name} has unknown type id {type_id}")
            if dims[0] % ttype.block_size:
                raise cur.fail(
                    f"tensor {name}: row of {dims[0]} elements is not a multiple of "
                    f"the {ttype.name} block size {ttype.block_size}"
                )
            offset = cur.u64(f"offset of tensor {name}")
            n_bytes = n_elements // ttype.block_size * ttype.type_size
            infos.append((name, dims, ttype, offset, n_elements, n_bytes))

        self.data_offset = -(-cur.pos // self.alignment) * self.alignment
        data_size = (self.file_size if self.full_size is None else self.full_size) - self.data_offset
        self.tensors: dict[str, TensorInfo] = {}
        prev_end, prev_name = 0, None
        for name, dims, ttype, offset, n_elements, n_bytes in infos:
            if offset % self.alignment:
                raise cur.fail(
                    f"tensor {name} data offset {offset} is not a multiple of the alignment {self.alignment}"
                )
            if offset < prev_end:
                raise cur.fail(
                    f"tensor {name} data at offset {offset} overlaps or comes before "
                    f"tensor {prev_name}, which ends at {prev_end}"
                )
            if offset + n_bytes > data_size:
                raise cur.fail(
                    f"tensor {name} needs bytes {offset}..{offset + n_bytes} of the data "
                    f"region, which holds {max(data_size, 0)}; the file is truncated or damaged"
                )
            prev_end, prev_name = offset + n_bytes, name
            self.tensors[name] = TensorInfo(name, dims, ttype, self.data_offset + offset, n_elements, n_bytes)

    def _read_value(self, cur: _Cursor, vtype: ValueType, key: str) -> Any:
        if vtype == ValueType.STRING:
            return cur.raw_string(f"value of {key}").decode("utf-8", "replace")
        if vtype != ValueType.ARRAY:
            return cur.scalar(vtype, f"value of {key}")
        elem = _value_type(cur.u32(f"element type of {key}"), cur, f"array {key}")
        count = cur.u64(f"length of array {key}")
        remaining = cur.size - cur.pos
        start = cur.pos
        if elem == ValueType.ARRAY:
            raise cur.fail(f"array {key} holds arrays; nested arrays are not supported")
        if elem == ValueType.STRING:
            if count > remaining // 8:
                raise cur.fail(f"array {key} of {count} strings cannot fit in the {remaining} bytes left")
            buf, pos, end = self._mmap, cur.pos, cur.size
            unpack = _U64.unpack_from
            for j in range(count):
                if pos + 8 > end:
                    raise cur.fail(f"truncated: array {key} ends at string {j} of {count}")
                n = unpack(buf, pos)[0]
                pos += 8
                if n > end - pos:
                    raise cur.fail(f"array {key}: string {j} of {n} bytes at offset {pos}, {end - pos} left")
                pos += n
            cur.pos = pos
        else:
            size = SCALAR_FORMATS[elem][1]
            if count > remaining // size:
                raise cur.fail(
                    f"array {key} of {count} {elem.name} values needs {count * size} bytes, {remaining} left"
                )
            cur.pos += count * size
        return ArrayValue(elem, count, start, cur.pos)

    # -- tensor access ----------------------------------------------------------------------

    def _check_data_at_hand(self, name: str) -> None:
        if self.full_size is not None:
            raise ModelFormatError(f"{self.path}: holds only the header; tensor {name} is not here")

    def tensor_bytes(self, name: str) -> np.ndarray:
        """Read-only uint8 view of a tensor's rows: shape (n_rows, row_bytes). No copy."""
        self._check_data_at_hand(name)
        t = self.tensors[name]
        arr = np.frombuffer(self._mmap, dtype=np.uint8, count=t.n_bytes, offset=t.offset)
        return arr.reshape(t.n_rows, t.row_bytes)

    def tensor_array(self, name: str) -> np.ndarray:
        """Typed read-only view (numpy shape) of an F32, F16, F64 or integer tensor."""
        self._check_data_at_hand(name)
        t = self.tensors[name]
        dtypes = {
            "F32": "<f4",
            "F16": "<f2",
            "F64": "<f8",
            "I8": "<i1",
            "I16": "<i2",
            "I32": "<i4",
            "I64": "<i8",
            "BF16": "<u2",
        }
        if t.type.name not in dtypes:
            raise TypeError(f"tensor {name} is {t.type.name}; use tensor_bytes and a dequantizer")
        arr = np.frombuffer(self._mmap, dtype=dtypes[t.type.name], count=t.n_elements, offset=t.offset)
        return arr.reshape(t.shape)

    @property
    def n_params(self) -> int:
        return sum(t.n_elements for t in self.tensors.values())

    # -- lifetime ---------------------------------------------------------------------------

    # -- the file under us -------------------------------------------------------------------

    def check_unchanged(self) -> None:
        """Raise ModelFileChangedError when the mapped file was truncated, extended or rewritten
        in place since it was opened. Reading a mapped page past a file's new end kills the
        process (SIGBUS), so the engine calls this before each pass over the weights. A file
        replaced by another (renamed over) or deleted is not a change: the mapping keeps the
        old file, which nothing can truncate any more."""
        fd = getattr(self, "_fd", None)
        if fd is None:
            return
        try:
            st = os.fstat(fd)
        except OSError:  # closed under us: nothing mapped to protect
            return
        if st.st_size != self.file_size:
            raise ModelFileChangedError(
                f"The model file {os.path.basename(self.path)} changed on disk since it was loaded "
                f"(now {st.st_size} bytes, was {self.file_size}); load it again."
            )
        if st.st_mtime_ns != self._mtime_ns:
            raise ModelFileChangedError(
                f"The model file {os.path.basename(self.path)} changed on disk since it was loaded "
                f"(rewritten in place, still {st.st_size} bytes); load it again."
            )

    def same_file_at_path(self) -> bool:
        """Whether `path` still names the mapped file (False: replaced by another, or deleted)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == getattr(self, "_dev_ino", None)

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        m = getattr(self, "_mmap", None)
        if m is not None:
            try:
                m.close()
            except BufferError:
                pass  # numpy views still use it; it is released when they are
            self._mmap = None  # type: ignore[assignment]  # closed: no use after close()
        self._close_fd()

    def _close_fd(self) -> None:
        """The descriptor kept for check_unchanged, closed once (close() or the collector)."""
        fd = getattr(self, "_fd", None)
        if fd is not None:
            self._fd = None  # type: ignore[assignment]  # closed once
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        self._close_fd()

    def __enter__(self) -> "GGUFFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_gguf(path: str | os.PathLike, *, full_size: int | None = None) -> GGUFFile:
    """Open and validate a GGUF file (or, with `full_size`, the first bytes of one: see
    GGUFFile). Raises ModelFormatError with a one-line reason."""
    return GGUFFile(path, full_size=full_size)
