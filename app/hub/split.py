"""Join the parts of a split GGUF model (`name-00001-of-0000N.gguf`, as llama.cpp's gguf-split
writes them) into one GGUF file, which is what the library and the engine open.

Each part is read with the strict reader first. The joined file has the first part's metadata
without the `split.*` keys, every part's tensor descriptors in order with offsets laid out
again at the first part's alignment, then the tensor bytes copied part by part. The output is
written to `out` as it is; the caller owns the temporary name and the rename.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO, Callable

from app.errors import ModelFormatError
from app.gguf import GGUFFile, ValueType, open_gguf
from app.gguf.constants import GGUF_MAGIC, SCALAR_FORMATS

COPY_CHUNK = 4 << 20


def _string(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def _encoded_metadata(f: GGUFFile, key: str, raw: BinaryIO) -> bytes:
    """key, type and value, as the GGUF format stores them."""
    md = f.metadata
    vtype = md.type_of(key)
    out = _string(key.encode("utf-8")) + struct.pack("<I", int(vtype))
    if vtype == ValueType.STRING:
        return out + _string(md.get(key).encode("utf-8"))
    if vtype == ValueType.ARRAY:
        a = md.array_info(key)
        if a is None:  # never: type_of said ARRAY
            raise ModelFormatError(f"{key}: an array without its value")
        raw.seek(a.start)
        return out + struct.pack("<IQ", int(a.elem_type), a.count) + raw.read(a.end - a.start)
    return out + struct.pack(SCALAR_FORMATS[vtype][0], md.get(key))


def join_split(parts: list[Path], out: Path, progress: Callable[[int, int], None] | None = None) -> None:
    """Write the model split across `parts` (in order) as one GGUF file at `out`."""
    files = [open_gguf(p) for p in parts]
    try:
        first = files[0]
        count = first.metadata.get("split.count")
        if count is not None and int(count) != len(parts):
            raise ModelFormatError(f"{parts[0]}: split.count says {count} parts, {len(parts)} were given")
        tensors, seen = [], set()
        for i, f in enumerate(files):
            no = f.metadata.get("split.no")
            if no is not None and int(no) != i:
                raise ModelFormatError(f"{parts[i]}: split.no is {no}, expected {i}")
            for t in f.tensors.values():
                if t.name in seen:
                    raise ModelFormatError(f"{parts[i]}: tensor {t.name} is in two parts")
                seen.add(t.name)
                tensors.append((f, t))
        align = first.alignment
        keys = [k for k in first.metadata.keys() if not k.startswith("split.")]
        with open(parts[0], "rb") as raw0:
            meta = b"".join(_encoded_metadata(first, k, raw0) for k in keys)
        infos, offset = [], 0
        for _f, t in tensors:
            infos.append(
                _string(t.name.encode("utf-8"))
                + struct.pack("<I", len(t.dims))
                + b"".join(struct.pack("<Q", d) for d in t.dims)
                + struct.pack("<IQ", t.type.id, offset)
            )
            offset += -(-t.n_bytes // align) * align
        header = GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(keys)) + meta + b"".join(infos)
        total = offset
        done = 0
        with open(out, "wb") as dst:
            dst.write(header + b"\0" * (-len(header) % align))
            handles: dict[str, BinaryIO] = {}
            try:
                for f, t in tensors:
                    src = handles.get(f.path) or handles.setdefault(f.path, open(f.path, "rb"))
                    src.seek(t.offset)
                    left = t.n_bytes
                    while left:
                        chunk = src.read(min(COPY_CHUNK, left))
                        if not chunk:
                            raise ModelFormatError(f"{f.path}: ends inside tensor {t.name}")
                        dst.write(chunk)
                        left -= len(chunk)
                        done += len(chunk)
                        if progress:
                            progress(done, total)
                    dst.write(b"\0" * (-t.n_bytes % align))
            finally:
                for h in handles.values():
                    h.close()
        open_gguf(out).close()  # the joined file passes the strict reader, or nothing is kept
    finally:
        for f in files:
            f.close()


__all__ = ["join_split"]
