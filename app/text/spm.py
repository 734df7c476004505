"""A SentencePiece model built in memory from a GGUF `llama` vocabulary.

The ModelProto is serialized by hand (a few protobuf fields; no protobuf runtime needed):
BPE model type, byte fallback, identity normalization with no dummy prefix and no whitespace
escaping — the caller escapes spaces to U+2581 itself and adds the space prefix where
llama.cpp would, so the library only merges. Every token that llama.cpp's own merge loop could
reach is declared NORMAL (user-defined and control tokens included, with their scores); byte
tokens are BYTE and the unknown token UNKNOWN.
"""

from __future__ import annotations

import re

import numpy as np

from app.errors import TokenizerError
from app.text.vocab import ATTR_BYTE, Vocab

# sentencepiece_model.proto field numbers and enum values (published schema).
_PIECE_NORMAL, _PIECE_UNKNOWN, _PIECE_BYTE = 1, 2, 6
_MODEL_BPE = 2
_BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>\Z")


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1  # negative int32 values are written as 10-byte varints
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field_bytes(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _field_varint(num: int, value: int) -> bytes:
    return _varint(num << 3) + _varint(value)


def model_proto(vocab: Vocab) -> bytes:
    """Serialized sentencepiece ModelProto for `vocab` (tokens in id order)."""
    n = vocab.n_vocab
    scores = vocab.scores if vocab.scores is not None else np.zeros(n, np.float32)
    unk = vocab.ids.get("unk")
    if unk is None:
        raise TokenizerError("SentencePiece vocabulary without an unknown token")
    packed_scores = np.asarray(scores, dtype="<f4").tobytes()
    parts = []
    attrs = vocab.attrs
    tag_piece, tag_score, tag_type = b"\x0a", b"\x15", b"\x18"
    for i, text in enumerate(vocab.tokens):
        if i == unk:
            kind = _PIECE_UNKNOWN
        elif attrs[i] & ATTR_BYTE and _BYTE_PIECE.match(text):
            kind = _PIECE_BYTE
        else:
            kind = _PIECE_NORMAL
        raw = text.encode("utf-8", "surrogatepass")
        body = (
            tag_piece
            + _varint(len(raw))
            + raw
            + tag_score
            + packed_scores[4 * i : 4 * i + 4]
            + tag_type
            + bytes((kind,))
        )
        parts.append(b"\x0a" + _varint(len(body)) + body)
    trainer = (
        _field_varint(3, _MODEL_BPE)
        + _field_varint(4, n)
        + _field_varint(35, 1)
        + _field_varint(40, unk)
        + _field_varint(41, (1 << 64) - 1)
        + _field_varint(42, (1 << 64) - 1)
        + _field_varint(43, (1 << 64) - 1)
    )
    normalizer = _field_bytes(1, b"identity") + _field_varint(3, 0) + _field_varint(4, 0) + _field_varint(5, 0)
    return b"".join(parts) + _field_bytes(2, trainer) + _field_bytes(3, normalizer)


class SentencePieceMerger:
    """Merges already-escaped text (spaces as U+2581) into token ids with the sentencepiece library."""

    def __init__(self, vocab: Vocab):
        import sentencepiece  # lazy: heavy; only SentencePiece vocabularies need it

        self._sp = sentencepiece.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(model_proto(vocab))
        except (RuntimeError, OSError) as e:
            raise TokenizerError(f"the SentencePiece vocabulary could not be built: {e}") from e
        if self._sp.GetPieceSize() != vocab.n_vocab:
            raise TokenizerError("the SentencePiece model lost tokens while loading")

    def encode(self, escaped: str) -> list[int]:
        return self._sp.EncodeAsIds(escaped)
