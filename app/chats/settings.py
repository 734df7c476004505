"""Settings: the sampling a new conversation starts with, and the engine's context length,
threads, overflow policy, KV cache type, the disk budget of saved KV states and speculative
decoding (off, prompt lookup, or a draft model: "auto" or its path; most guesses per pass), with the
defaults of app/defaults.py (the one definition); the values live in the conversation store's settings table (`ChatStore.get_setting`).

Reading never fails: a stored value of the wrong type or out of range falls back to its default
alone (the other values are kept), and unknown keys are ignored.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

from app import defaults

if TYPE_CHECKING:
    from app.chats.store import ChatStore

SAMPLING_DEFAULTS = dict(defaults.SAMPLING)
ENGINE_DEFAULTS = dict(defaults.ENGINE)  # threads 0 = automatic
KV_TYPES = defaults.KV_TYPES
OVERFLOW_POLICIES = ("shift", "stop")
MAX_N_CTX = 1 << 20
MAX_KV_BUDGET_MB = 1 << 24  # 16 TiB: any disk
SPECULATION_MODES = defaults.SPECULATION_MODES
MAX_DRAFT_MAX = 16  # app.engine.speculative.K_MAX


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


VALID: dict[str, Callable[[Any], bool]] = {
    "temperature": lambda v: _num(v) and 0 <= v <= 10,
    "top_k": lambda v: _int(v) and v >= 0,
    "top_p": lambda v: _num(v) and 0 < v <= 1,
    "min_p": lambda v: _num(v) and 0 <= v <= 1,
    "repeat_penalty": lambda v: _num(v) and 0 < v <= 10,
    "seed": lambda v: _int(v) and -1 <= v < 2**63,
    "max_tokens": lambda v: _int(v) and v > 0,
    "n_ctx": lambda v: _int(v) and (v == 0 or 16 <= v <= MAX_N_CTX),
    "kv_type": lambda v: v in KV_TYPES,
    "threads": lambda v: _int(v) and 0 <= v <= 1024,
    "overflow": lambda v: v in OVERFLOW_POLICIES,
    "kv_budget_mb": lambda v: _int(v) and 0 <= v <= MAX_KV_BUDGET_MB,
    "speculation": lambda v: v in SPECULATION_MODES,
    "draft": lambda v: isinstance(v, str) and 0 < len(v) <= 4096,  # "auto" or a model's path
    "draft_max": lambda v: _int(v) and 1 <= v <= MAX_DRAFT_MAX,
}


def clean(values: Any, defaults: dict) -> dict:
    """`defaults` updated with the valid known entries of `values` (any JSON value)."""
    out = dict(defaults)
    if isinstance(values, dict):
        out.update({k: v for k, v in values.items() if k in defaults and VALID[k](v)})
    return out


def sampling_defaults(store: ChatStore) -> dict:
    """The sampling settings a new conversation starts with."""
    return clean(store.get_setting("sampling_defaults"), SAMPLING_DEFAULTS)


def engine_settings(store: ChatStore) -> dict:
    """Context length, threads (0: automatic), the overflow policy, the KV type, the disk
    budget of saved KV states (MiB; 0: none kept) and speculation (mode, draft, draft_max)."""
    return clean(store.get_setting("engine"), ENGINE_DEFAULTS)
