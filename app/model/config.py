"""GGUF metadata → one frozen `DecoderConfig` that the generic decoder runs.

Architectures differ by data: each entry of `ARCHITECTURES` says how its metadata and tensors
map onto the switches of the decoder. Values are checked for sanity here, before anything is
allocated, so an absurd file is refused with numbers rather than an allocation failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.errors import ModelFormatError, UnsupportedModelError
from app.gguf.constants import ValueType
from app.gguf.reader import GGUFFile, Metadata
from app.units import format_bytes

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
    """What distinguishes one architecture for the generic decoder (as llama.cpp reads it)."""

    rope_kind: str = "normal"  # "normal" (pairs 2i, 2i+1) or "neox" (pairs i, i + d/2)
    norm_kind: str = "rms"
    activation: str = "silu"  # of the gated feed-forward
    qkv_bias: bool = False
    qk_norm: bool = False
    post_norms: bool = False
    embd_scale_sqrt: bool = False  # scale embeddings by sqrt(n_embd)
    norm_weight_offset: float = 0.0  # some exporters store (w - 1) — none of ours do
    # sliding window: None = the architecture has none (a sliding_window key is ignored, as
    # llama.cpp does for llama/Mistral files); n = every n-th layer attends globally, the others
    # to the window (1: every layer global; 0: every layer local). A file's
    # attention.sliding_window_pattern (a period, or one flag per layer) overrides it.
    swa_pattern: int | None = None
    swa_default: int = 0  # window when the file has no attention.sliding_window key
    swa_own_rope_base: bool = False  # local layers use rope.freq_base_swa (default 10000)
    output_always_tied: bool = False  # output.weight is never read (gemma2)
    big_model_layers: int = 0  # at this block_count queries scale by 1/sqrt(n_embd / n_head)
    softcaps: tuple[str, ...] = ()  # which of "attn", "final" logit soft-caps it reads
    fused_ffn: bool = False  # ffn_up holds gate rows then up rows, no ffn_gate (phi3)
    fused_qkv_ok: bool = False  # attn_qkv (Q, K then V rows) may stand for attn_q/k/v (phi3)
    runnable: bool = False  # the engine runs it today, proven against llama.cpp
    lacking: str = ""  # when not runnable: what the engine lacks for it, in a verdict's words


ARCHITECTURES: dict[str, ArchSpec] = {
    "llama": ArchSpec(runnable=True),
    "qwen2": ArchSpec(rope_kind="neox", qkv_bias=True, runnable=True),
    "qwen3": ArchSpec(rope_kind="neox", qk_norm=True, runnable=True),
    "gemma": ArchSpec(
        rope_kind="neox", activation="gelu", embd_scale_sqrt=True, output_always_tied=True, runnable=True
    ),
    "gemma2": ArchSpec(
        rope_kind="neox",
        activation="gelu",
        post_norms=True,
        embd_scale_sqrt=True,
        swa_pattern=2,
        swa_default=4096,
        output_always_tied=True,
        softcaps=("attn", "final"),
        big_model_layers=46,
        runnable=True,
    ),
    "gemma3": ArchSpec(
        rope_kind="neox",
        activation="gelu",
        post_norms=True,
        qk_norm=True,
        embd_scale_sqrt=True,
        swa_pattern=6,
        swa_own_rope_base=True,
        softcaps=("final",),
        big_model_layers=62,
        runnable=True,
    ),
    "phi3": ArchSpec(rope_kind="neox", fused_ffn=True, fused_qkv_ok=True, runnable=True),
}

# tensors every layer needs, and those an architecture adds
LAYER_TENSORS = (
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
)


def layer_tensor_names(spec: ArchSpec, fused_qkv: bool = False) -> tuple[str, ...]:
    """The per-layer tensor names (after "blk.N.") the decoder needs for this architecture
    (fused_qkv: the file has attn_qkv where the architecture allows it)."""
    names = list(LAYER_TENSORS)
    if spec.fused_qkv_ok and fused_qkv:
        names = [n for n in names if n not in ("attn_q.weight", "attn_k.weight", "attn_v.weight")]
        names.insert(1, "attn_qkv.weight")
    if spec.fused_ffn:
        names.remove("ffn_gate.weight")
    if spec.qkv_bias:
        names += ["attn_q.bias", "attn_k.bias", "attn_v.bias"]
    if spec.qk_norm:
        names += ["attn_q_norm.weight", "attn_k_norm.weight"]
    if spec.post_norms:
        names += ["post_attention_norm.weight", "post_ffw_norm.weight"]
    return tuple(names)


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
    rope_scaling: str = "none"  # none | linear | yarn
    rope_scale: float = 1.0  # context extension factor for linear / yarn
    rope_orig_ctx: int = 0
    sliding_window: int = 0  # 0: full attention on every layer
    swa_layers: tuple[bool, ...] = ()  # per layer: attends to the sliding window (else global)
    rope_base_swa: float = 0.0  # > 0: RoPE base of the sliding-window layers (unscaled)
    attn_scale: float = 0.0  # > 0: query scale instead of 1/sqrt(head_dim)
    rope_freqs: bool = False  # rope_freqs.weight divides the pairs' frequencies (Llama 3.1)
    rope_longrope: bool = False  # rope_factors_short/long.weight do (phi3), by context length
    rope_attn_factor: float = 1.0  # rope.scaling.attn_factor: scales cos and sin (LongRoPE)
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
                    note = f" (its KV cache alone would need {format_bytes(self.kv_cache_bytes(value))})"
                raise ModelFormatError(f"{self.arch}.{name} is {value}, outside the sane range {lo}..{hi}{note}")
        if self.n_head % self.n_head_kv:
            raise ModelFormatError(
                f"{self.arch}: {self.n_head} query heads cannot be shared by {self.n_head_kv} KV heads"
            )
        if self.rope_dim % 2:
            raise ModelFormatError(f"{self.arch}.rope.dimension_count {self.rope_dim} is odd")
        if len(self.swa_layers) not in (0, self.n_layer):
            raise ModelFormatError(
                f"{self.arch}: {len(self.swa_layers)} sliding-window flags for {self.n_layer} layers"
            )
        if not (0 <= self.rope_base_swa < 1e12):
            raise ModelFormatError(
                f"{self.arch}.rope.freq_base_swa is {self.rope_base_swa}, not a positive finite number"
            )
        for name, number in (
            ("rope.freq_base", self.rope_base),
            ("rope.scaling.factor", self.rope_scale),
            ("rope.scaling.attn_factor", self.rope_attn_factor),
        ):
            if not (0 < number < 1e12):  # also refuses NaN
                raise ModelFormatError(f"{self.arch}.{name} is {number}, not a positive finite number")
        for name, number in (
            ("attn_logit_softcapping", self.attn_softcap),
            ("final_logit_softcapping", self.final_softcap),
        ):
            if not (0 <= number < 1e12):
                raise ModelFormatError(f"{self.arch}.{name} is {number}, not a non-negative finite number")
        if not (self.norm_eps > 0 and self.norm_eps < 1):
            raise ModelFormatError(f"{self.arch}.attention.layer_norm_rms_epsilon is {self.norm_eps}, not in (0, 1)")

    @property
    def n_gqa(self) -> int:
        return self.n_head // self.n_head_kv

    def kv_cache_bytes(self, n_ctx: int, kv_bytes_per_value: int = 2) -> int:
        """K and V for every layer at `n_ctx` positions."""
        return 2 * self.n_layer * n_ctx * self.n_head_kv * self.head_dim * kv_bytes_per_value


def _int(md: Metadata, key: str, default: object = Metadata._MISSING) -> int:
    return md.integer(key, default)


def _sliding_window(md: Metadata, p: str, spec: ArchSpec, n_layer: int) -> tuple[int, tuple[bool, ...]]:
    """(window, per-layer flags) as llama.cpp reads them: the architecture's default pattern of
    local and global layers, or attention.sliding_window_pattern (a period or one flag a layer)."""
    if spec.swa_pattern is None:
        return 0, ()
    window = _int(md, p + "attention.sliding_window", spec.swa_default)
    if window <= 0 or n_layer < 1 or n_layer > MAX_N_LAYER:
        return 0, ()
    key = p + "attention.sliding_window_pattern"
    a = md.array_info(key)
    if a is not None and a.elem_type == ValueType.BOOL:  # one flag per layer, as written
        raw = md.get(key)
    else:
        raw = md.integer_or_array(key, spec.swa_pattern) if key in md else spec.swa_pattern
    if isinstance(raw, int):
        n = raw
        flags = tuple(n == 0 or il % n < n - 1 for il in range(n_layer))
    else:
        flags = tuple(bool(v) for v in raw)
        if len(flags) != n_layer:
            raise ModelFormatError(f"{key} has {len(flags)} entries for {n_layer} layers")
    return window, flags


def config_from_gguf(f: GGUFFile) -> DecoderConfig:
    """Read the decoder's hyper-parameters; raises ModelFormatError / UnsupportedModelError."""
    md = f.metadata
    arch = md.string("general.architecture")
    spec = ARCHITECTURES.get(arch)
    if spec is None:
        raise UnsupportedModelError(
            f"architecture {arch!r} is not supported (known: {', '.join(sorted(ARCHITECTURES))})"
        )
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
    if scaling == "longrope":  # the factor tensors carry it
        scaling = "none"
    if scaling not in ("none", "linear", "yarn"):
        raise UnsupportedModelError(f"{arch}: rope scaling {scaling!r} is not supported")
    n_layer = _int(md, p + "block_count")
    window, swa_layers = _sliding_window(md, p, spec, n_layer)
    rope_base = md.number(p + "rope.freq_base", 10000.0)
    rope_base_swa = 0.0
    if window and spec.swa_own_rope_base:
        rope_base_swa = md.number(p + "rope.freq_base_swa", 10000.0)
    caps = {}
    for kind in ("attn", "final"):  # checked always, applied where llama.cpp reads them
        key = f"{p}{kind}_logit_softcapping"
        value = md.number(key, 0.0)
        if not (0 <= value < 1e12):
            raise ModelFormatError(
                f"{f.path}: {arch}.{kind}_logit_softcapping is {value}, not a non-negative finite number"
            )
        caps[kind] = value if kind in spec.softcaps else 0.0
    attn_scale = 0.0
    if spec.big_model_layers and n_layer == spec.big_model_layers:
        attn_scale = float((n_embd // n_head) ** -0.5)

    try:
        cfg = DecoderConfig(
            arch=arch,
            n_vocab=n_vocab,
            n_ctx_train=_int(md, p + "context_length"),
            n_embd=n_embd,
            n_layer=n_layer,
            n_head=n_head,
            n_head_kv=n_head_kv,
            head_dim=head_dim,
            n_ff=_int(md, p + "feed_forward_length"),
            norm_eps=md.number(p + "attention.layer_norm_rms_epsilon", 1e-5),
            rope_dim=_int(md, p + "rope.dimension_count", head_dim),
            rope_base=rope_base,
            rope_scaling=scaling,
            rope_scale=md.number(p + "rope.scaling.factor", 1.0),
            rope_orig_ctx=_int(md, p + "rope.scaling.original_context_length", 0),
            sliding_window=window,
            swa_layers=swa_layers,
            rope_base_swa=rope_base_swa,
            attn_scale=attn_scale,
            rope_freqs="rope_freqs.weight" in f.tensors,
            rope_longrope="rope_freqs.weight" not in f.tensors
            and "rope_factors_short.weight" in f.tensors
            and "rope_factors_long.weight" in f.tensors,
            rope_attn_factor=md.number(p + "rope.scaling.attn_factor", 1.0),
            attn_softcap=caps["attn"],
            final_softcap=caps["final"],
            tied_output=spec.output_always_tied or "output.weight" not in f.tensors,
            spec=spec,
        )
    except ModelFormatError as e:
        msg = str(e)
        raise ModelFormatError(msg if msg.startswith(f.path) else f"{f.path}: {msg}") from None
    if emb.dims[0] != cfg.n_embd:
        raise ModelFormatError(
            f"{f.path}: token_embd.weight rows have {emb.dims[0]} values, embedding_length says {n_embd}"
        )
    return cfg
