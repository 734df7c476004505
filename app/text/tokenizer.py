"""Tokenizers built from a GGUF vocabulary: `load_tokenizer(gguf_file) -> Tokenizer`.

Two families, chosen by `tokenizer.ggml.model`:
- `llama`: SentencePiece-style BPE over scores, through the `sentencepiece` library (app.text.spm);
- `gpt2`: byte-level BPE over merges, through the `tokenizers` library, with the split
  expressions that `tokenizer.ggml.pre` names (app.text.pretokenize).
Both follow llama.cpp's rules: special tokens are cut out of the raw text first, longest first
(user-defined always, control and unknown only with `parse_special`), and the model runs only
on the text between them. Ids match llama.cpp's tokenizer; the tests hold them to golden files.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from app.errors import TokenizerError
from app.text.pretokenize import IGNORE_MERGES, NO_CLEAN_SPACES, clean_up_spaces, split_expressions
from app.text.spm import SentencePieceMerger

if TYPE_CHECKING:
    from app.gguf import GGUFFile, Metadata
from app.text.vocab import (
    ATTR_BYTE,
    ATTR_CONTROL,
    ATTR_LSTRIP,
    ATTR_NORMAL,
    ATTR_RSTRIP,
    ATTR_UNKNOWN,
    ATTR_USER_DEFINED,
    Vocab,
    warn_once,
)

_SPACE = " "
_ESCAPED_SPACE = "\u2581"
_C_SPACES = " \t\n\v\f\r"  # what C's isspace() accepts, for the strip attributes
_SURROGATE = re.compile("[\ud800-\udfff]")


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (a published fact of the format)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    mapping, extra = {}, 0
    for b in range(256):
        if b in keep:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


_UNICODE_TO_BYTE = {c: b for b, c in byte_to_unicode().items()}


class _ByteLevelBPE:
    """Byte-level BPE through `tokenizers`: split expressions, then GPT-2 byte mapping, then merges."""

    def __init__(self, vocab: Vocab):
        from tokenizers import Regex, Tokenizer, pre_tokenizers  # lazy: heavy; only byte-level BPE needs it
        from tokenizers.models import BPE

        exprs, known = split_expressions(vocab.pre)
        if not known:
            warn_once(
                f"unknown pre-tokenizer {vocab.pre!r}: using the default split; "
                "token ids may differ from the model's own tokenizer"
            )
        elif not vocab.pre:
            warn_once("the model names no pre-tokenizer (tokenizer.ggml.pre): using the default split")
        merges = []
        table = vocab.token_to_id
        for m in vocab.merges:
            cut = m.find(" ", 1)
            if cut < 0:
                continue
            a, b = m[:cut], m[cut + 1 :]
            if a in table and b in table and a + b in table:  # llama.cpp could never emit anything else
                merges.append((a, b))
        # A byte character missing from the vocabulary still takes part in merging (it blocks its
        # neighbours from merging across it) and is dropped afterwards, as llama.cpp does: give it
        # a placeholder id past the vocabulary and filter those ids out.
        self._n_vocab = vocab.n_vocab
        missing = [c for c in _UNICODE_TO_BYTE if c not in table]
        if missing:
            table = dict(table)
            for k, c in enumerate(missing):
                table[c] = vocab.n_vocab + k
        try:
            try:
                model = BPE(table, merges, ignore_merges=vocab.pre in IGNORE_MERGES)
            except TypeError:  # tokenizers older than 0.20 has no ignore_merges
                if vocab.pre in IGNORE_MERGES:
                    warn_once(
                        "this tokenizers library cannot skip merges for whole-word tokens; "
                        "a few token ids may differ from the model's own tokenizer"
                    )
                model = BPE(table, merges)
            self._tok = Tokenizer(model)
            self._tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Split(Regex(e), behavior="isolated") for e in exprs]
                + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
            )
        except Exception as e:  # the library raises plain Exception subclasses
            raise TokenizerError(f"the byte-level BPE vocabulary could not be built: {e}") from e

        # The batch entry points release the GIL (a long text must not freeze the window's thread);
        # the "fast" one also skips character offsets we do not need.
        self._encode_batch = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)

    def encode(self, text: str) -> list[int]:
        ids = self._encode_batch([text], add_special_tokens=False)[0].ids
        n = self._n_vocab
        return ids if all(i < n for i in ids) else [i for i in ids if i < n]


class Tokenizer:
    """Text ↔ token ids for one model. Build with `load_tokenizer` or `Tokenizer(vocab)`."""

    def __init__(self, vocab: Vocab):
        self.vocab = vocab
        self.kind = "spm" if vocab.model == "llama" else "bpe"
        self._backend = _SentencePiece(vocab) if self.kind == "spm" else _ByteLevelBPE(vocab)
        attrs = vocab.attrs
        special = np.flatnonzero(attrs & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN))
        # Longest text first; ties keep id order (deterministic).
        self._special = sorted((int(i) for i in special), key=lambda i: -len(vocab.tokens[i].encode()))
        self._pieces: list[bytes | None] = [None] * vocab.n_vocab  # lazily filled piece cache
        self._user_defined_only = [i for i in self._special if not attrs[i] & (ATTR_CONTROL | ATTR_UNKNOWN)]
        self._user_defined_set = frozenset(self._user_defined_only)

    # ---- properties ---------------------------------------------------------------------------
    @property
    def n_vocab(self) -> int:
        return self.vocab.n_vocab

    @property
    def bos_id(self) -> int | None:
        return self.vocab.ids["bos"]

    @property
    def eos_id(self) -> int | None:
        return self.vocab.ids["eos"]

    @property
    def eot_id(self) -> int | None:
        return self.vocab.ids["eot"]

    @property
    def eog_ids(self) -> frozenset[int]:
        return self.vocab.eog_ids

    @property
    def add_bos(self) -> bool:
        return self.vocab.add_bos

    @property
    def add_eos(self) -> bool:
        return self.vocab.add_eos

    @property
    def clean_spaces(self) -> bool:
        """Whether the model's own detokenizer tidies spaces before punctuation (GPT-2 style)."""
        return self.kind == "bpe" and self.vocab.pre not in NO_CLEAN_SPACES

    def describe(self) -> dict:
        """Plain data about the vocabulary, for `llambda inspect` and logs."""
        v = self.vocab

        def named(i: int | None) -> dict | None:
            return None if i is None else {"id": i, "text": v.tokens[i]}

        return {
            "model": v.model,
            "pre": v.pre or None,
            "n_vocab": v.n_vocab,
            "n_merges": len(v.merges),
            "bos": named(v.ids["bos"]),
            "eos": named(v.ids["eos"]),
            "eot": named(v.ids["eot"]),
            "eog": [named(i) for i in sorted(v.eog_ids)],
            "add_bos": v.add_bos,
            "add_eos": v.add_eos,
            "add_space_prefix": v.add_space_prefix,
        }

    def is_eog(self, token: int) -> bool:
        return token in self.vocab.eog_ids

    def token_text(self, token: int) -> str:
        """The token's text as the vocabulary spells it (e.g. 'ĠHello', '▁Hello', '<0x0A>')."""
        return self.vocab.tokens[self._check(token)]

    def contains_control_text(self, text: str) -> bool:
        """Whether `text` spells a control (or unknown) token, e.g. "<|im_end|>"."""
        tokens = self.vocab.tokens
        return any(tokens[i] in text for i in self._special if i not in self._user_defined_set)

    def token_id(self, text: str) -> int | None:
        """The id of the token spelled exactly `text`, or None."""
        return self.vocab.token_to_id.get(text)

    # ---- encoding -----------------------------------------------------------------------------
    def encode(
        self,
        text: str,
        add_special: bool = True,
        parse_special: bool = False,
        plain_spans: list[tuple[int, int]] | None = None,
    ) -> list[int]:
        """Token ids of `text`; `add_special` adds BOS/EOS as the model asks; `parse_special` lets
        control-token strings in `text` become control tokens (only for template output).
        `plain_spans` [(start, end), ...] are character ranges where control tokens are never
        recognised even with `parse_special` (user text inside a rendered chat template)."""
        if not isinstance(text, str):
            raise TypeError(f"encode() takes str, not {type(text).__name__}")
        if _SURROGATE.search(text):  # lone surrogates cannot be UTF-8: they become U+FFFD
            text = _SURROGATE.sub("\ufffd", text)
        v = self.vocab
        fragments = self._partition(text, parse_special, plain_spans or ())
        out: list[int] = []
        if add_special and v.add_bos:
            out.append(v.ids["bos"])  # type: ignore[arg-type]  # set: the Vocab checks add_bos
        if self.kind == "spm":
            prev_special = True
            for frag in fragments:
                if isinstance(frag, int):
                    out.append(frag)
                    prev_special = True
                    continue
                if v.add_space_prefix and prev_special:
                    frag = _SPACE + frag
                out.extend(self._backend.encode(frag.replace(_SPACE, _ESCAPED_SPACE)))
                prev_special = False
        else:
            for frag in fragments:
                if isinstance(frag, int):
                    out.append(frag)
                else:
                    out.extend(self._backend.encode(frag))
        if add_special and v.add_eos:
            out.append(v.ids["eos"])  # type: ignore[arg-type]  # set: the Vocab checks add_eos
        return out

    def _partition(
        self, text: str, parse_special: bool, plain_spans: Sequence[tuple[int, int]] = ()
    ) -> list[str | int]:
        """Cut special tokens out of `text`, longest first: a list of raw strings and token ids."""
        if not text:
            return []
        tokens, attrs = self.vocab.tokens, self.vocab.attrs
        candidates = self._special if parse_special else self._user_defined_only
        # Fragments as (start, end) ranges of `text`, or token ids.
        frags: list[tuple[int, int] | int] = [(0, len(text))]
        for tid in candidates:
            needle = tokens[tid]
            if needle not in text:
                continue
            a = int(attrs[tid])
            guarded = bool(plain_spans) and bool(a & (ATTR_CONTROL | ATTR_UNKNOWN))
            nxt: list[tuple[int, int] | int] = []
            for frag in frags:
                if isinstance(frag, int):
                    nxt.append(frag)
                    continue
                start, end = frag
                pos = start
                search = start
                while True:
                    hit = text.find(needle, search, end)
                    if hit < 0:
                        break
                    stop = hit + len(needle)
                    if guarded and any(s < stop and hit < e for s, e in plain_spans):
                        search = hit + 1
                        continue
                    left_end = hit
                    if a & ATTR_LSTRIP:
                        while left_end > pos and text[left_end - 1] in _C_SPACES:
                            left_end -= 1
                    if left_end > pos:
                        nxt.append((pos, left_end))
                    nxt.append(tid)
                    pos = stop
                    if a & ATTR_RSTRIP:
                        while pos < end and text[pos] in _C_SPACES:
                            pos += 1
                    search = pos
                if pos < end:
                    nxt.append((pos, end))
            frags = nxt
        return [f if isinstance(f, int) else text[f[0] : f[1]] for f in frags]

    # ---- decoding -----------------------------------------------------------------------------
    def _check(self, token: int) -> int:
        if not 0 <= token < self.vocab.n_vocab:
            raise TokenizerError(f"token id {token} is outside the vocabulary of {self.vocab.n_vocab}")
        return token

    def token_to_piece(self, token: int, special: bool = False) -> bytes:
        """The bytes token `token` stands for. Control and unknown tokens are empty unless
        `special`; a piece may be part of a UTF-8 character (byte tokens, split emoji)."""
        self._check(token)
        a = int(self.vocab.attrs[token])
        if a & (ATTR_CONTROL | ATTR_UNKNOWN):
            return self.vocab.tokens[token].encode() if special else b""
        piece = self._pieces[token]
        if piece is None:
            piece = self._pieces[token] = self._make_piece(token, a)
        return piece

    def _make_piece(self, token: int, a: int) -> bytes:
        text = self.vocab.tokens[token]
        if a & ATTR_USER_DEFINED:
            return text.encode()
        if a & ATTR_NORMAL:
            if self.kind == "spm":
                return text.replace(_ESCAPED_SPACE, _SPACE).encode()
            out = bytearray()
            for ch in text:
                b = _UNICODE_TO_BYTE.get(ch)
                if b is None:  # not a byte-level character: shown, marked, as llama.cpp does
                    out += b"[UNK_BYTE_0x" + ch.encode().hex().encode() + text.encode() + b"]"
                else:
                    out.append(b)
            return bytes(out)
        if a & ATTR_BYTE:
            try:
                return bytes((int(text[3:5], 16),))
            except ValueError:
                return b""
        return b""  # unused and undefined tokens show nothing

    def decode_bytes(self, ids: Iterable[int], special: bool = False, clean_spaces: bool | None = False) -> bytes:
        """The bytes of `ids` joined, as streamed: with a space prefix, the first token loses one
        leading space. `clean_spaces=None` tidies spaces as the model's detokenizer does
        (llama.cpp's llama_detokenize); the default False keeps the text as generated."""
        out = bytearray()
        strip = self.vocab.add_space_prefix
        for i, t in enumerate(ids):
            piece = self.token_to_piece(int(t), special)
            if i == 0 and strip and piece.startswith(b" "):
                piece = piece[1:]
            out += piece
        if clean_spaces or (clean_spaces is None and self.clean_spaces):
            return clean_up_spaces(bytes(out))
        return bytes(out)

    def decode(self, ids: Iterable[int], special: bool = False, clean_spaces: bool | None = False) -> str:
        """Text of `ids` (what a stream of them shows); bytes that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids, special, clean_spaces).decode("utf-8", errors="replace")


class _SentencePiece:
    def __init__(self, vocab: Vocab):
        self._merger = SentencePieceMerger(vocab)

    def encode(self, escaped: str) -> list[int]:
        return self._merger.encode(escaped)


def load_tokenizer(gguf_file: GGUFFile | Metadata, where: str | None = None) -> Tokenizer:
    """The tokenizer of an open GGUF file (`with open_gguf(path) as f: load_tokenizer(f)`)."""
    md = gguf_file.metadata if hasattr(gguf_file, "metadata") else gguf_file
    if where is None:
        where = str(getattr(gguf_file, "path", "model"))
    return Tokenizer(Vocab.from_metadata(md, where))
