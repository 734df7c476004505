"""Can this engine run a model? A verdict with every reason, decided before anything loads.

Also checks the tokenizer metadata (types, lengths, special ids) so that a file whose
vocabulary is inconsistent is refused as malformed rather than failing halfway through a load.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from app.errors import ModelFormatError, UnsupportedModelError
from app.gguf.constants import ValueType
from app.gguf.reader import GGUFFile
from app.model.config import ARCHITECTURES, DecoderConfig, config_from_gguf, layer_tensor_names

TOKENIZER_MODELS = {"gpt2": "byte-level BPE", "llama": "SentencePiece"}
SPECIAL_ID_KEYS = ("bos", "eos", "eot", "eom", "unknown", "padding", "sep", "cls", "mask")
MAX_NAMED_MISSING = 3  # tensors named one by one in a verdict; the rest are counted


@dataclass
class Verdict:
    supported: bool
    reasons: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return "supported" if self.supported else "not supported: " + "; ".join(self.reasons)


def runnable_tensor_types() -> frozenset[int] | None:
    """Type ids the compiled kernel library can run, or None when it is not built."""
    try:
        from app.kernels import SUPPORTED_TYPES  # lazy: numpy and the compiled library; a broken install has none
    except ImportError:
        return None
    return frozenset(SUPPORTED_TYPES)


def check_tokenizer_metadata(f: GGUFFile) -> None:
    """Refuse inconsistent vocabulary metadata (a hostile file: scores of the wrong type, lists of the wrong length, ids out of range)."""
    md = f.metadata
    if "tokenizer.ggml.model" not in md:
        return
    md.string("tokenizer.ggml.model")
    tokens = md.array_info("tokenizer.ggml.tokens")
    if tokens is None or tokens.elem_type != ValueType.STRING:
        md.string_array("tokenizer.ggml.tokens")  # raises a typed message (or "missing")
    n = tokens.count  # type: ignore[union-attr]  # not None: string_array raised above
    emb = f.tensors.get("token_embd.weight")
    if emb is not None and len(emb.dims) == 2 and emb.dims[1] != n:
        raise ModelFormatError(
            f"{f.path}: tokenizer.ggml.tokens has {n} entries but token_embd.weight has {emb.dims[1]} rows"
        )
    for key, types in (
        ("tokenizer.ggml.scores", {ValueType.FLOAT32}),
        ("tokenizer.ggml.token_type", {ValueType.INT32, ValueType.UINT32}),
    ):
        if key not in md:
            continue
        a = md.array_info(key)
        if a is None or a.elem_type not in types:
            got = md.type_of(key).name if a is None else f"ARRAY of {a.elem_type.name}"
            want = " or ".join(t.name for t in types)
            raise ModelFormatError(f"{f.path}: metadata {key} is {got}, expected an ARRAY of {want}")
        if a.count != n:
            raise ModelFormatError(f"{f.path}: metadata {key} has {a.count} entries for {n} tokens")
    if "tokenizer.ggml.merges" in md:
        a = md.array_info("tokenizer.ggml.merges")
        if a is None or a.elem_type != ValueType.STRING:
            md.string_array("tokenizer.ggml.merges")  # raises with the actual type
    for name in SPECIAL_ID_KEYS:
        key = f"tokenizer.ggml.{name}_token_id"
        if key in md:
            tid = md.integer(key)
            if not 0 <= tid < n and not (name == "padding" and tid in (-1, 0xFFFFFFFF)):
                raise ModelFormatError(f"{f.path}: metadata {key} is {tid}, outside the vocabulary of {n}")


def missing_tensors(f: GGUFFile, cfg: DecoderConfig) -> list[str]:
    """Names of the tensors the decoder needs for cfg's architecture that the file lacks."""
    need = ["token_embd.weight", "output_norm.weight"]
    for i in range(cfg.n_layer):
        fused = f"blk.{i}.attn_qkv.weight" in f.tensors
        need += [f"blk.{i}.{t}" for t in layer_tensor_names(cfg.spec, fused)]
    return [name for name in need if name not in f.tensors]


GLOBAL_TENSORS = (
    "token_embd.weight",
    "output_norm.weight",
    "output_norm.bias",
    "output.weight",
    "rope_freqs.weight",
    "rope_factors_short.weight",
    "rope_factors_long.weight",
)
BIASES = ("attn_norm.bias", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "ffn_norm.bias")


def unused_tensors(f: GGUFFile, cfg: DecoderConfig) -> dict[str, list[str]]:
    """Tensors in the file that the decoder would not apply, by name pattern ("blk.*.ffn_up.bias"):
    a model that needs them would run, and be wrong."""
    per_layer = {"blk.*." + t for t in BIASES}
    per_layer |= {"blk.*." + t for fused in (False, True) for t in layer_tensor_names(cfg.spec, fused)}
    unused: dict[str, list[str]] = {}
    for name in f.tensors:
        parts = name.split(".")
        pattern = name
        if parts[0] == "blk" and len(parts) > 2 and parts[1].isdigit() and int(parts[1]) < cfg.n_layer:
            pattern = "blk.*." + ".".join(parts[2:])
            if pattern in per_layer:
                continue
        elif name in GLOBAL_TENSORS:
            continue
        unused.setdefault(pattern, []).append(name)
    return unused


def support_verdict(f: GGUFFile) -> Verdict:
    """Every reason this engine cannot run the model; `supported` when there is none.

    Raises ModelFormatError when the file is malformed in a way that makes a verdict moot.
    """
    reasons: list[str] = []
    arch = f.metadata.string("general.architecture", None)
    if arch is None:
        reasons.append("general.architecture is missing")
    elif arch not in ARCHITECTURES:
        reasons.append(f"architecture {arch!r} is not supported")
    elif not ARCHITECTURES[arch].runnable:
        spec = ARCHITECTURES[arch]
        reasons.append(f"architecture {arch!r} is not supported yet" + (f" ({spec.lacking})" if spec.lacking else ""))
    else:
        try:
            cfg = config_from_gguf(f)
        except UnsupportedModelError as e:
            reasons.append(str(e))
        else:
            reasons += [f"{name} missing" for name in missing_tensors(f, cfg)[:MAX_NAMED_MISSING]]
            extra = len(missing_tensors(f, cfg)) - MAX_NAMED_MISSING
            if extra > 0:
                reasons.append(f"{extra} more tensor{'s' if extra > 1 else ''} missing")
            for pattern, names in unused_tensors(f, cfg).items():
                more = f" (and {len(names) - 1} more like it)" if len(names) > 1 else ""
                reasons.append(f"{names[0]} is not used by this engine{more}")

    runnable = runnable_tensor_types()
    if runnable is None:
        reasons.append("the kernel library is not built (reinstall Llambda)")
    else:
        bad = Counter(t.type.name for t in f.tensors.values() if t.type.id not in runnable)
        for name, count in sorted(bad.items()):
            reasons.append(f"tensor type {name} is not supported ({count} tensors)")

    tok = f.metadata.string("tokenizer.ggml.model", None)
    if tok is None:
        reasons.append("the file carries no tokenizer (tokenizer.ggml.model)")
    elif tok not in TOKENIZER_MODELS:
        reasons.append(f"tokenizer model {tok!r} is not supported")
    check_tokenizer_metadata(f)
    return Verdict(not reasons, reasons)


def require_supported(f: GGUFFile) -> Verdict:
    v = support_verdict(f)
    if not v.supported:
        raise UnsupportedModelError(f"{f.path}: {v.summary()}")
    return v


__all__ = [
    "Verdict",
    "support_verdict",
    "missing_tensors",
    "unused_tensors",
    "require_supported",
    "check_tokenizer_metadata",
    "runnable_tensor_types",
]
