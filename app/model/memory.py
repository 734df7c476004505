"""How much memory a model needs at a given context length, before anything is allocated.

weights: the mapped tensor bytes (the page cache holds them; they count toward resident memory
once touched). kv cache: K and V for every layer and position. scratch: activations of one
batch, attention scores and the logits.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.gguf.reader import GGUFFile
from app.model.config import DecoderConfig, config_from_gguf

KV_BYTES = {"f16": 2, "f32": 4, "q8_0": 34 / 32}  # per value (q8_0: 32 int8 + a float16 scale)
DEFAULT_BATCH = 512


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int
    kv_cache_bytes: int
    scratch_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes + self.scratch_bytes


def scratch_bytes(cfg: DecoderConfig, n_ctx: int, n_batch: int = DEFAULT_BATCH) -> int:
    per_token = 4 * (4 * cfg.n_embd + 2 * cfg.n_head * cfg.head_dim + 3 * cfg.n_ff)
    scores = 4 * n_ctx * min(n_batch, n_ctx)  # one head at a time
    logits = 4 * cfg.n_vocab * 2
    return n_batch * per_token + scores + logits


def estimate_memory(
    f: GGUFFile, n_ctx: int | None = None, kv_type: str = "f16", cfg: DecoderConfig | None = None
) -> MemoryEstimate:
    """Memory to run `f` at `n_ctx` positions (default: the training context)."""
    cfg = cfg or config_from_gguf(f)
    n_ctx = cfg.n_ctx_train if n_ctx is None else n_ctx
    weights = sum(t.n_bytes for t in f.tensors.values())
    if kv_type not in KV_BYTES:
        raise ValueError(f"kv_type must be one of {tuple(KV_BYTES)}, not {kv_type!r}")
    kv = int(cfg.kv_cache_bytes(n_ctx, 1) * KV_BYTES[kv_type])
    return MemoryEstimate(weights, kv, scratch_bytes(cfg, n_ctx))
