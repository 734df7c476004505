"""Choosing the next token from logits: greedy, or penalties → top-k → top-p → min-p →
temperature → a seeded draw (llama.cpp's default order). Cheap on 262,144-entry vocabularies: nothing sorts the whole
vocabulary (argpartition picks candidates, only they are sorted) and penalties touch only the
tokens of the window. Same seed and settings, same tokens.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["SamplerSettings", "Sampler", "GREEDY"]


@dataclass(frozen=True)
class SamplerSettings:
    """temperature <= 0 means greedy (arg-max after penalties). top_k <= 0, top_p >= 1 and
    min_p <= 0 switch those filters off; repeat_penalty 1 and the other two 0 switch penalties off.
    Penalties look at the last `penalty_last_n` tokens of the context (prompt and reply)."""

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    penalty_last_n: int = 64
    seed: int | None = None

    def __post_init__(self) -> None:
        if not np.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, not {self.temperature}")
        if not 0.0 < self.top_p <= 1.0 and self.top_p < 1.0:
            raise ValueError(f"top_p must be in (0, 1], not {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1], not {self.min_p}")
        if not self.repeat_penalty > 0:
            raise ValueError(f"repeat_penalty must be > 0, not {self.repeat_penalty}")
        if self.penalty_last_n < 0:
            raise ValueError(f"penalty_last_n must be >= 0, not {self.penalty_last_n}")

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0

    @property
    def penalized(self) -> bool:
        return (self.repeat_penalty != 1.0 or self.frequency_penalty != 0.0
                or self.presence_penalty != 0.0) and self.penalty_last_n > 0


GREEDY = SamplerSettings(temperature=0.0)


class Sampler:
    """One per generation (it owns the random generator). `sample(logits, context)` -> token id."""

    def __init__(self, settings: SamplerSettings = GREEDY):
        self.settings = settings
        self._rng = np.random.default_rng(settings.seed)

    def apply_penalties(self, logits: np.ndarray, context: Sequence[int]) -> np.ndarray:
        """Logits with repeat / frequency / presence penalties for the tokens in the window.
        Returns `logits` itself when no penalty applies, else a copy."""
        s = self.settings
        if not s.penalized or len(context) == 0:
            return logits
        window = context[-s.penalty_last_n:]
        counts = Counter(int(t) for t in window)
        ids = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
        cnt = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
        ids_ok = (ids >= 0) & (ids < logits.shape[0])
        ids, cnt = ids[ids_ok], cnt[ids_ok]
        out = logits.copy()
        v = out[ids]
        if s.repeat_penalty != 1.0:
            v = np.where(v > 0, v / s.repeat_penalty, v * s.repeat_penalty)
        v = v - cnt * s.frequency_penalty - (cnt > 0) * s.presence_penalty
        out[ids] = v.astype(np.float32)
        return out

    def candidates(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, logits) that survive top-k, then top-p, then min-p, best first (before
        temperature) -- llama.cpp's order: top-p's probabilities are renormalised over what
        top-k kept, min-p is relative to the best token."""
        s = self.settings
        n = logits.shape[0]
        k = s.top_k if 0 < s.top_k < n else n
        mx = float(logits.max())
        ids = _top(logits, k) if k < n else None
        if s.top_p < 1.0:
            if ids is not None:
                z = float(np.exp(logits[ids] - mx).sum())
            else:
                # no top-k: the normaliser needs one exp over the vocabulary, then grow a
                # candidate set by argpartition until it holds top_p of the mass
                z = float(np.exp(logits - mx).sum())
                ids = _top(logits, min(n, 64))
                while ids.size < n and np.exp(logits[ids] - mx).sum() / z < s.top_p:
                    ids = _top(logits, min(n, ids.size * 8))
            ids = ids[np.argsort(-logits[ids], kind="stable")]
            cum = np.cumsum(np.exp(logits[ids] - mx) / z)
            cut = int(np.searchsorted(cum, s.top_p)) + 1   # the first prefix with mass >= top_p
            ids = ids[:cut]
        if s.min_p > 0.0:
            # p >= min_p * p_max  <=>  logit >= max + log(min_p)
            floor = mx + np.log(s.min_p)
            ids = np.flatnonzero(logits >= floor) if ids is None else ids[logits[ids] >= floor]
        if ids is None:
            ids = np.arange(n)
        ids = ids[np.argsort(-logits[ids], kind="stable")]
        return ids, logits[ids]

    def sample(self, logits: np.ndarray, context: Sequence[int] = ()) -> int:
        logits = self.apply_penalties(np.asarray(logits, dtype=np.float32), context)
        if self.settings.greedy:
            return int(np.argmax(logits))
        ids, vals = self.candidates(logits)
        if ids.size == 1:
            return int(ids[0])
        w = (vals - vals[0]) / np.float32(self.settings.temperature)
        p = np.exp(w.astype(np.float64))
        p /= p.sum()
        return int(ids[int(self._rng.choice(ids.size, p=p))])


def _top(logits: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest logits, unordered. On a large vocabulary the k-th largest of
    every 16th logit bounds the answer from below (a subset's k-th largest is never above the
    whole set's), so one comparison pass leaves a few hundred candidates for argpartition."""
    n = logits.shape[0]
    if k >= n:
        return np.arange(n)
    if n >= 64 * k and n >= 4096:
        sub = logits[::16]
        floor = np.partition(sub, sub.size - k)[sub.size - k]
        cand = np.flatnonzero(logits >= floor)
        if cand.size > k:
            return cand[np.argpartition(-logits[cand], k - 1)[:k]]
        return cand
    return np.argpartition(-logits, k - 1)[:k]
