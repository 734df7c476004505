"""The one definition of Llambda's defaults: sampling, reply length, context, threads and speculation.

The window's settings (app/chats/settings.py), the command line's flags (app/engine/cli.py), the
engine (SamplerSettings, Engine) and the UI's engine adapter all read these names; nothing else
writes a default number of its own. tests/test_defaults.py fails when an entry point disagrees.
Plain values only, no imports: any layer may read this module.
"""

from __future__ import annotations

# -- sampling (llama.cpp's defaults: top-k, then top-p, then min-p, then temperature) -----------
TEMPERATURE = 0.8  # 0 = greedy
TOP_K = 40  # 0 = off
TOP_P = 0.95  # 1 = off
MIN_P = 0.05  # 0 = off
REPEAT_PENALTY = 1.0  # 1 = off
FREQUENCY_PENALTY = 0.0
PRESENCE_PENALTY = 0.0
PENALTY_LAST_N = 64  # tokens of context the penalties look at
SEED = -1  # -1 (None in the engine) = a fresh random seed each time
MAX_TOKENS = 512  # most tokens in one reply

# -- engine ---------------------------------------------------------------------------------------
N_CTX = 0  # context length; 0 = automatic: the model's training length, capped
# by what the memory pre-flight says fits with the KV type
THREADS = 0  # 0 = automatic (physical cores)
N_BATCH = 512  # prompt tokens per decoder call
KV_TYPE = "f16"  # KV cache: "f16", "q8_0" (half the memory) or "f32"
KV_TYPES = ("f16", "q8_0", "f32")
OVERFLOW = "shift"  # when the context is full: drop the oldest turns ("shift") or "stop"
KV_BUDGET_MB = 2048  # disk kept for saved conversation KV states (MiB); 0 = none kept
SPECULATION = "lookup"  # guess tokens ahead: "lookup" (from the conversation), "draft" (a
SPECULATION_MODES = ("off", "lookup", "draft")  # small model of the same vocabulary) or "off"
DRAFT = "auto"  # the draft model: "auto" (the library's smallest compatible) or a path
DRAFT_MAX = 8  # most tokens guessed per pass (1..16)

SAMPLING = {
    "temperature": TEMPERATURE,
    "top_k": TOP_K,
    "top_p": TOP_P,
    "min_p": MIN_P,
    "repeat_penalty": REPEAT_PENALTY,
    "seed": SEED,
    "max_tokens": MAX_TOKENS,
}
ENGINE = {
    "n_ctx": N_CTX,
    "threads": THREADS,
    "overflow": OVERFLOW,
    "kv_type": KV_TYPE,
    "kv_budget_mb": KV_BUDGET_MB,
    "speculation": SPECULATION,
    "draft": DRAFT,
    "draft_max": DRAFT_MAX,
}


def seed_or_none(seed: int | float | str | None) -> int | None:
    """The engine's seed from a stored one: None (random) for -1 or anything negative."""
    return None if seed is None or int(seed) < 0 else int(seed)


__all__ = [
    "TEMPERATURE",
    "TOP_K",
    "TOP_P",
    "MIN_P",
    "REPEAT_PENALTY",
    "FREQUENCY_PENALTY",
    "PRESENCE_PENALTY",
    "PENALTY_LAST_N",
    "SEED",
    "MAX_TOKENS",
    "N_CTX",
    "THREADS",
    "N_BATCH",
    "KV_TYPE",
    "KV_TYPES",
    "OVERFLOW",
    "KV_BUDGET_MB",
    "SPECULATION",
    "SPECULATION_MODES",
    "DRAFT",
    "DRAFT_MAX",
    "SAMPLING",
    "ENGINE",
    "seed_or_none",
]
