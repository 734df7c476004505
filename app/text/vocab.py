"""The vocabulary a GGUF file carries: tokens, types, scores, merges and special ids.

`Vocab.from_metadata(metadata)` reads and checks every `tokenizer.*` key once, applies the
defaults and the text-based special-token rules that llama.cpp applies (end-of-generation
tokens found by their text, FIM tokens, "unused" control tokens), and computes per-token
attributes. It builds no tokenizer; `app.text.tokenizer` does that from a `Vocab`.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

import numpy as np

from app.errors import TokenizerError

if TYPE_CHECKING:
    from app.gguf import Metadata

log = logging.getLogger(__name__)

# GGUF token types (tokenizer.ggml.token_type).
TYPE_UNDEFINED, TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER_DEFINED, TYPE_UNUSED, TYPE_BYTE = range(7)

# Token attributes (bit flags), derived from the types and then adjusted by rules.
ATTR_UNDEFINED = 0
ATTR_UNKNOWN = 1 << 0
ATTR_UNUSED = 1 << 1
ATTR_NORMAL = 1 << 2
ATTR_CONTROL = 1 << 3
ATTR_USER_DEFINED = 1 << 4
ATTR_BYTE = 1 << 5
ATTR_LSTRIP = 1 << 7
ATTR_RSTRIP = 1 << 8

_ATTR_OF_TYPE = {
    TYPE_UNDEFINED: ATTR_UNDEFINED,
    TYPE_NORMAL: ATTR_NORMAL,
    TYPE_UNKNOWN: ATTR_UNKNOWN,
    TYPE_CONTROL: ATTR_CONTROL,
    TYPE_USER_DEFINED: ATTR_USER_DEFINED,
    TYPE_UNUSED: ATTR_UNUSED,
    TYPE_BYTE: ATTR_BYTE,
}

# Texts that mark a token as the end of a turn / of generation (facts about real vocabularies).
EOT_TEXTS = (
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
)
EOM_TEXTS = ("<|eom_id|>",)
EOG_TEXTS = (
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
)
FIM_TEXTS = {
    "fim_pre": (
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<｜fim▁begin｜>",
        "<PRE>",
        "▁<PRE>",
        "<|code_prefix|>",
        "<|prefix|>",
    ),
    "fim_suf": (
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<｜fim▁hole｜>",
        "<SUF>",
        "▁<SUF>",
        "<|code_suffix|>",
        "<|suffix|>",
    ),
    "fim_mid": (
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<｜fim▁end｜>",
        "<MID>",
        "▁<MID>",
        "<|code_middle|>",
        "<|middle|>",
    ),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}
ALWAYS_RENDERED = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")

_ID_KEYS = {
    "bos": "tokenizer.ggml.bos_token_id",
    "eos": "tokenizer.ggml.eos_token_id",
    "eot": "tokenizer.ggml.eot_token_id",
    "eom": "tokenizer.ggml.eom_token_id",
    "unk": "tokenizer.ggml.unknown_token_id",
    "sep": "tokenizer.ggml.seperator_token_id",
    "pad": "tokenizer.ggml.padding_token_id",
    "mask": "tokenizer.ggml.mask_token_id",
    "fim_pre": "tokenizer.ggml.fim_pre_token_id",
    "fim_suf": "tokenizer.ggml.fim_suf_token_id",
    "fim_mid": "tokenizer.ggml.fim_mid_token_id",
    "fim_pad": "tokenizer.ggml.fim_pad_token_id",
    "fim_rep": "tokenizer.ggml.fim_rep_token_id",
    "fim_sep": "tokenizer.ggml.fim_sep_token_id",
}
_DEPRECATED_ID_KEYS = {
    "fim_pre": "tokenizer.ggml.prefix_token_id",
    "fim_suf": "tokenizer.ggml.suffix_token_id",
    "fim_mid": "tokenizer.ggml.middle_token_id",
}

SUPPORTED_MODELS = ("llama", "gpt2")

# Byte-level families whose tokenizer adds BOS unless the file says otherwise.
_BPE_ADD_BOS = frozenset(
    [
        "llama3",
        "llama-v3",
        "llama-bpe",
        "falcon3",
        "falcon-h1",
        "pixtral",
        "midm-2.0",
        "lfm2",
        "jina-v5-nano",
        "tekken",
        "chameleon",
    ]
)


@dataclass
class Vocab:
    """Everything a tokenizer needs, checked. `attrs[i]` are ATTR_* flags of token i."""

    model: str  # tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE)
    pre: str  # tokenizer.ggml.pre ("" when absent)
    tokens: list[str]
    attrs: np.ndarray  # (n_vocab,) int32 ATTR_* flags
    scores: np.ndarray | None  # (n_vocab,) float32, SentencePiece merge priority
    merges: list[str]  # "a b" strings, byte-level BPE only
    ids: dict[str, int | None]  # bos, eos, eot, eom, unk, sep, pad, mask, fim_*
    add_bos: bool
    add_eos: bool
    add_space_prefix: bool
    eog_ids: frozenset[int]
    token_to_id: dict[str, int] = field(repr=False, default_factory=dict)

    @property
    def n_vocab(self) -> int:
        return len(self.tokens)

    @classmethod
    def from_metadata(cls, md: Metadata, where: str = "model") -> "Vocab":
        try:
            return _read_vocab(md, where)
        except TokenizerError:
            raise
        except (ValueError, TypeError, KeyError) as e:  # the reader's ModelFormatError is a ValueError
            raise TokenizerError(f"{where}: bad tokenizer metadata: {e}") from e


def _check_array(md: Metadata, key: str, allowed: tuple[str, ...], where: str) -> None:
    """Refuse an array of the wrong element type, as llama.cpp does (it would misread it)."""
    info = md.array_info(key)
    if info is None:
        raise TokenizerError(f"{where}: {key} is not an array")
    if info.elem_type.name not in allowed:
        raise TokenizerError(f"{where}: {key} holds {info.elem_type.name} values; expected {' or '.join(allowed)}")


def _read_vocab(md: Metadata, where: str) -> Vocab:
    model = md.string("tokenizer.ggml.model", None)
    if model is None:
        raise TokenizerError(f"{where}: no tokenizer.ggml.model in the file")
    if model not in SUPPORTED_MODELS:
        raise TokenizerError(
            f"{where}: tokenizer model {model!r} is not supported (supported: {', '.join(SUPPORTED_MODELS)})"
        )
    pre = md.string("tokenizer.ggml.pre", "") if model == "gpt2" else ""
    if "tokenizer.ggml.tokens" not in md:
        raise TokenizerError(f"{where}: no tokenizer.ggml.tokens in the file")
    _check_array(md, "tokenizer.ggml.tokens", ("STRING",), where)
    tokens = md.string_array("tokenizer.ggml.tokens")
    n = len(tokens)
    if n == 0:
        raise TokenizerError(f"{where}: the token list is empty")
    for i, t in enumerate(tokens):
        if not t:
            tokens[i] = f"[EMPTY_{i}]"
    if "tokenizer.ggml.token_type" in md:
        _check_array(md, "tokenizer.ggml.token_type", ("INT32",), where)
        types = np.asarray(md.numeric_array("tokenizer.ggml.token_type", "int"), dtype=np.int64)
        if len(types) < n:
            raise TokenizerError(f"{where}: {len(types)} token types for {n} tokens")
        types = types[:n]
    else:
        types = np.full(n, TYPE_NORMAL, dtype=np.int64)
    attrs = np.zeros(n, dtype=np.int32)
    for type_id, attr in _ATTR_OF_TYPE.items():
        attrs[types == type_id] = attr
    scores = None
    if "tokenizer.ggml.scores" in md:
        _check_array(md, "tokenizer.ggml.scores", ("FLOAT32", "INT32"), where)
        scores = np.asarray(md.numeric_array("tokenizer.ggml.scores", "float"), dtype=np.float32)
        if len(scores) < n:
            raise TokenizerError(f"{where}: {len(scores)} token scores for {n} tokens")
        scores = scores[:n]
    merges: list[str] = []
    if model == "gpt2":
        if "tokenizer.ggml.merges" not in md:
            raise TokenizerError(f"{where}: byte-level BPE vocabulary without tokenizer.ggml.merges")
        _check_array(md, "tokenizer.ggml.merges", ("STRING",), where)
        merges = md.string_array("tokenizer.ggml.merges")

    token_to_id = {t: i for i, t in enumerate(tokens)}
    if len(token_to_id) != n:
        raise TokenizerError(f"{where}: the token list holds {n - len(token_to_id)} duplicate token(s)")

    # Defaults per tokenizer family, then the metadata.
    ids: dict[str, int | None] = dict.fromkeys(_ID_KEYS)
    if model == "llama":
        ids.update(bos=1, eos=2, unk=0)
        add_bos, add_space_prefix = True, True
    else:
        ids.update(bos=11, eos=11)
        if pre in ("chatglm-bpe", "glm4", "glm5"):
            ids["bos"] = None
        add_bos, add_space_prefix = pre in _BPE_ADD_BOS, False
    add_eos = False
    for name, value in list(ids.items()):
        if value is not None and value >= n:
            ids[name] = None
    for name, key in list(_ID_KEYS.items()) + list(_DEPRECATED_ID_KEYS.items()):
        if key not in md:
            continue
        value = md.integer(key)
        if 0 <= value < n:
            ids[name] = value
        else:
            log.warning("%s: %s = %d is outside the vocabulary of %d tokens; ignored", where, key, value, n)
    add_bos = md.boolean("tokenizer.ggml.add_bos_token", add_bos)
    add_eos = md.boolean("tokenizer.ggml.add_eos_token", add_eos)
    add_space_prefix = md.boolean("tokenizer.ggml.add_space_prefix", add_space_prefix)
    if add_bos and ids["bos"] is None:
        raise TokenizerError(f"{where}: add_bos_token is set but the vocabulary has no BOS token")
    if add_eos and ids["eos"] is None:
        raise TokenizerError(f"{where}: add_eos_token is set but the vocabulary has no EOS token")

    # Special tokens found by their text, as llama.cpp does; they become control tokens.
    def find(texts: Iterable[str]) -> int | None:
        for t in texts:  # llama.cpp walks a hash map; the first text present is as good a rule
            if t in token_to_id:
                return token_to_id[t]
        return None

    def force_control(i: int) -> None:
        attrs[i] |= ATTR_CONTROL

    if ids["eot"] is None and (found := find(EOT_TEXTS)) is not None:
        ids["eot"] = found
        force_control(found)
    if ids["eom"] is None and (found := find(EOM_TEXTS)) is not None:
        ids["eom"] = found
        force_control(found)
    for name, fim_texts in FIM_TEXTS.items():
        if ids[name] is None and (found := find(fim_texts)) is not None:
            ids[name] = found
            force_control(found)
    for c in np.flatnonzero(attrs & ATTR_CONTROL):
        if "unused" in tokens[c]:
            attrs[c] |= ATTR_UNUSED

    eog: set[int] = {v for k in ("fim_pad", "fim_rep", "fim_sep") if (v := ids[k]) is not None}
    for t in EOG_TEXTS:
        if t in token_to_id:
            eog.add(token_to_id[t])
            force_control(token_to_id[t])
    for t in ALWAYS_RENDERED:
        if t in token_to_id:
            attrs[token_to_id[t]] = ATTR_USER_DEFINED
    for k in ("eos", "eot", "eom"):
        if (v := ids[k]) is not None:
            eog.add(v)
    texts = {tokens[i] for i in eog}
    if "<|end|>" in texts and (
        ("<|return|>" in texts and "<|call|>" in texts) or ("<|calls|>" in texts and "<|flush|>" in texts)
    ):
        end = token_to_id["<|end|>"]
        eog.discard(end)
        attrs[end] = ATTR_USER_DEFINED
    if "</s>" in texts and ("<|tool_response>" in texts or "<|plamo:eos|>" in texts):
        s = token_to_id["</s>"]
        eog.discard(s)
        attrs[s] = ATTR_NORMAL

    # Per-model attributes that the file does not carry.
    name = md.string("general.name", "").lower()
    if "phi-3" in name or "phi3" in name:
        for c in np.flatnonzero(attrs & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)):
            attrs[c] |= ATTR_RSTRIP
        for t, on in (("</s>", True), ("<unk>", False), ("<s>", False), ("<|endoftext|>", False)):
            if t in token_to_id:
                i = token_to_id[t]
                attrs[i] = (attrs[i] | ATTR_RSTRIP) if on else (attrs[i] & ~ATTR_RSTRIP)

    return Vocab(
        model=model,
        pre=pre,
        tokens=tokens,
        attrs=attrs,
        scores=scores,
        merges=merges,
        ids=ids,
        add_bos=add_bos,
        add_eos=add_eos,
        add_space_prefix=add_space_prefix,
        eog_ids=frozenset(eog),
        token_to_id=token_to_id,
    )


def warn_once(message: str) -> None:
    """A warning people see (logged and raised through `warnings`)."""
    log.warning(message)
    warnings.warn(message, stacklevel=3)
