"""GGUF metadata → one frozen `DecoderConfig` that the generic decoder runs.

Architectures differ by data: each entry of `ARCHITECTURES` says how its metadata and tensors
map onto the switches of the decoder. Values are checked for sanity here, before anything is
allocated, so an absurd file is refused with numbers rather than an allocation failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.errors import ModelFormatError, UnsupportedModelError
from app.gguf.reader import GGUFFile, Metadata

# Sanity ceilings: far above any real model, far below what would overflow a size computation.
MAX_N_EMBD = 1 << 17
MAX_N_FF = 1 << 20
MAX_N_LAYER = 1 << 12
MAX_N_HEAD = 1 << 12
MAX_HEAD_DIM = 1 << 12
MAX_N_VOCAB = 1 << 22
MAX_N_CTX = 1 << 27


@dataclass(frozen=True)
class ArchSpec:
    """What distinguishes one architecture for the generic decoder."""

    rope_kind: str = "normal"  # "normal" (pairs 2i, 2i+1) or "neox" (pairs i, i + d/2)
    norm_kind: str = "rms"
    activation: str = "silu"  # of the gated feed-forward
    qkv_bias: bool = False
    qk_norm: bool = False
    post_norms: bool = False
    embd_scale_sqrt: bool = False  # scale embeddings by sqrt(n_embd)
    norm_weight_offset: float = 0.0  # some exporters store (w - 1) — none of ours do
    runnable: bool = False  # the engine runs it today


ARCHITECTURES: dict[str, ArchSpec] = {
    "llama": ArchSpec(runnable=True),
    "mistral": ArchSpec(),
    "qwen2": ArchSpec(rope_kind="neox", qkv_bias=True),
    "qwen3": ArchSpec(rope_kind="neox", qk_norm=True),
    "gemma": ArchSpec(rope_kind="neox", activation="gelu", embd_scale_sqrt=True),
    "gemma2": ArchSpec(rope_kind="neox", activation="gelu", post_norms=True, embd_scale_sqrt=True),
    "gemma3": ArchSpec(rope_kind="neox", activation="gelu", post_norms=True, qk_norm=True,
                       embd_scale_sqrt=True),
    "phi3": ArchSpec(rope_kind="neox"),
}


@dataclass(frozen=True)
class DecoderConfig:
    """Hyper-parameters of a decoder-only transformer, in GGUF's words.

    Shapes: embeddings (n_vocab, n_embd); Q (n_head * head_dim); K, V (n_head_kv * head_dim).
    """

    arch: str
    n_vocab: int
    n_ctx_train: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    norm_eps: float
    rope_dim: int
    rope_base: float = 10000.0
    rope_scaling: str = "none"  # none | linear | yarn | llama3
    rope_scale: float = 1.0  # context extension factor for linear / yarn / llama3
    rope_orig_ctx: int = 0
    sliding_window: int = 0  # 0: full attention on every layer
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    tied_output: bool = False
    spec: ArchSpec = field(default_factory=ArchSpec)

    def __post_init__(self) -> None:
        checks = [
            ("embedding_length", self.n_embd, 1, MAX_N_EMBD),
            ("feed_forward_length", self.n_ff, 1, MAX_N_FF),
            ("block_count", self.n_layer, 1, MAX_N_LAYER),
            ("attention.head_count", self.n_head, 1, MAX_N_HEAD),
            ("attention.head_count_kv", self.n_head_kv, 1, MAX_N_HEAD),
            ("head dimension", self.head_dim, 1, MAX_HEAD_DIM),
            ("vocabulary size", self.n_vocab, 1, MAX_N_VOCAB),
            ("context_length", self.n_ctx_train, 1, MAX_N_CTX),
            ("rope.dimension_count", self.rope_dim, 0, self.head_dim),
        ]
        for name, value, lo, hi in checks:
            if not lo <= value <= hi:
                note = ""
                if name == "context_length" and value > hi:
                    from app.model.memory import format_bytes

                    note = f" (its KV cache alone would need {format_bytes(self.kv_cache_bytes(value))})"
                raise ModelFormatError(
                    f"{self.arch}.{name} is {value}, outside the sane range {lo}..{hi}{note}")
        if self.n_head % self.n_head_kv:
            raise ModelFormatError(
                f"{self.arch}: {self.n_head} query heads cannot be shared by {self.n_head_kv} KV heads")
        if self.rope_dim % 2:
            raise ModelFormatError(f"{self.arch}.rope.dimension_count {self.rope_dim} is odd")
        for name, value in (("rope.freq_base", self.rope_base), ("rope.scaling.factor", self.rope_scale)):
            if not (0 < value < 1e12):  # also refuses NaN
                raise ModelFormatError(f"{self.arch}.{name} is {value}, not a positive finite number")
        for name, value in (("attn_logit_softcapping", self.attn_softcap),
                            ("final_logit_softcapping", self.final_softcap)):
            if not (0 <= value < 1e12):
                raise ModelFormatError(f"{self.arch}.{name} is {value}, not a non-negative finite number")
        if not (self.norm_eps > 0 and self.norm_eps < 1):
            raise ModelFormatError(f"{self.arch}.attention.layer_norm_rms_epsilon is {self.norm_eps}, not in (0, 1)")

    @property
    def n_gqa(self) -> int:
        return self.n_head // self.n_head_kv

    def kv_cache_bytes(self, n_ctx: int, kv_bytes_per_value: int = 2) -> int:
        """K and V for every layer at `n_ctx` positions."""
        return 2 * self.n_layer * n_ctx * self.n_head_kv * self.head_dim * kv_bytes_per_value


def _int(md: Metadata, key: str, default=Metadata._MISSING) -> int:
    return md.integer(key, default)


def config_from_gguf(f: GGUFFile) -> DecoderConfig:
    """Read the decoder's hyper-parameters; raises ModelFormatError / UnsupportedModelError."""
    md = f.metadata
    arch = md.string("general.architecture")
    spec = ARCHITECTURES.get(arch)
    if spec is None:
        raise UnsupportedModelError(f"architecture {arch!r} is not supported "
                                    f"(known: {', '.join(sorted(ARCHITECTURES))})")
    p = arch + "."
    n_embd = _int(md, p + "embedding_length")
    n_head = _int(md, p + "attention.head_count")
    n_head_kv_raw = md.integer_or_array(p + "attention.head_count_kv", n_head)
    if not isinstance(n_head_kv_raw, int):
        values = {int(v) for v in n_head_kv_raw}
        if len(values) != 1:
            raise UnsupportedModelError(f"{arch}: a different KV head count per layer is not supported")
        n_head_kv_raw = values.pop()
    n_head_kv = n_head_kv_raw
    if n_head < 1 or n_head > MAX_N_HEAD:
        raise ModelFormatError(f"{arch}.attention.head_count is {n_head}, outside 1..{MAX_N_HEAD}")
    head_dim = _int(md, p + "attention.key_length", n_embd // n_head if n_head else 0)
    head_dim_v = _int(md, p + "attention.value_length", head_dim)
    if head_dim_v != head_dim:
        raise UnsupportedModelError(f"{arch}: key length {head_dim} differs from value length {head_dim_v}")

    emb = f.tensors.get("token_embd.weight")
    if emb is None:
        raise ModelFormatError(f"{f.path}: tensor token_embd.weight is missing")
    n_vocab = emb.dims[1] if len(emb.dims) == 2 else 0

    scaling = md.string(p + "rope.scaling.type", "none")
    if scaling not in ("none", "linear", "yarn"):
        raise UnsupportedModelError(f"{arch}: rope scaling {scaling!r} is not supported")
    if "rope_freqs.weight" in f.tensors:
        scaling = "llama3" if scaling == "none" else scaling

    try:
        cfg = DecoderConfig(
            arch=arch,
            n_vocab=n_vocab,
            n_ctx_train=_int(md, p + "context_length"),
            n_embd=n_embd,
            n_layer=_int(md, p + "block_count"),
            n_head=n_head,
            n_head_kv=n_head_kv,
            head_dim=head_dim,
            n_ff=_int(md, p + "feed_forward_length"),
            norm_eps=md.number(p + "attention.layer_norm_rms_epsilon", 1e-5),
            rope_dim=_int(md, p + "rope.dimension_count", head_dim),
            rope_base=md.number(p + "rope.freq_base", 10000.0),
            rope_scaling=scaling,
            rope_scale=md.number(p + "rope.scaling.factor", 1.0),
            rope_orig_ctx=_int(md, p + "rope.scaling.original_context_length", 0),
            sliding_window=_int(md, p + "attention.sliding_window", 0),
            attn_softcap=md.number(p + "attn_logit_softcapping", 0.0),
            final_softcap=md.number(p + "final_logit_softcapping", 0.0),
            tied_output="output.weight" not in f.tensors,
            spec=spec,
        )
    except ModelFormatError as e:
        msg = str(e)
        raise ModelFormatError(msg if msg.startswith(f.path) else f"{f.path}: {msg}") from None
    if emb.dims[0] != cfg.n_embd:
        raise ModelFormatError(
            f"{f.path}: token_embd.weight rows have {emb.dims[0]} values, embedding_length says {n_embd}")
    return cfg
