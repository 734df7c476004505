"""Choosing the next token from logits: greedy, or penalties → top-k → top-p → min-p →
temperature → a seeded draw (llama.cpp's default order), in C (kernels/llk_sample.c). Cheap on
262,144-entry vocabularies: one pass picks top-k, nothing sorts the whole vocabulary while a filter
is on, and penalties touch only the tokens of the window. Same seed and settings, same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from app import defaults as D
from app.kernels import CPointer, ffi, lib

__all__ = ["SamplerSettings", "Sampler", "GREEDY"]


@dataclass(frozen=True)
class SamplerSettings:
    """temperature <= 0 means greedy (arg-max after penalties). top_k <= 0, top_p >= 1 and
    min_p <= 0 switch those filters off; repeat_penalty 1 and the other two 0 switch penalties off.
    Penalties look at the last `penalty_last_n` tokens of the context (prompt and reply)."""

    temperature: float = D.TEMPERATURE
    top_k: int = D.TOP_K
    top_p: float = D.TOP_P
    min_p: float = D.MIN_P
    repeat_penalty: float = D.REPEAT_PENALTY
    frequency_penalty: float = D.FREQUENCY_PENALTY
    presence_penalty: float = D.PRESENCE_PENALTY
    penalty_last_n: int = D.PENALTY_LAST_N
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
        return (
            self.repeat_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0
        ) and self.penalty_last_n > 0


GREEDY = SamplerSettings(temperature=0.0)


class Sampler:
    """One per generation (it owns the random generator). `sample(logits, context)` -> token id.

    The chain runs in C (kernels/llk_sample.c) in one call per token; the random generator stays
    here (numpy's, seeded), and hands C one uniform number per draw."""

    def __init__(self, settings: SamplerSettings = GREEDY):
        self.settings = settings
        self._rng = np.random.default_rng(settings.seed)
        s = settings
        self._params = ffi.new(
            "llk_sampler_params *",
            dict(
                temperature=s.temperature,
                top_k=max(-1, min(s.top_k, 2**31 - 1)),
                top_p=s.top_p,
                min_p=s.min_p,
                repeat_penalty=s.repeat_penalty,
                frequency_penalty=s.frequency_penalty,
                presence_penalty=s.presence_penalty,
            ),
        )
        self._scratch: np.ndarray | None = None
        self._before: Mapping[str, Any] | None = None  # the generator's state before the last uniforms()

    def _window(self, context: Sequence[int]) -> np.ndarray:
        if not self.settings.penalized or len(context) == 0:
            return _NO_WINDOW
        return np.asarray(context[-self.settings.penalty_last_n :], dtype=np.int32)

    def _buffers(self, logits: np.ndarray) -> tuple[np.ndarray, int, CPointer, CPointer]:
        logits = np.ascontiguousarray(logits, dtype=np.float32).reshape(-1)
        n = logits.shape[0]
        if n == 0:
            raise ValueError("sample: no logits")
        return logits, n, ffi.from_buffer("float[]", logits), ffi.from_buffer(self.scratch(n))

    def candidates(self, logits: np.ndarray, context: Sequence[int] = ()) -> tuple[np.ndarray, np.ndarray]:
        """(ids, logits after penalties) that survive top-k, then top-p, then min-p, best first
        (before temperature) -- llama.cpp's order: top-p's probabilities are renormalised over
        what top-k kept, min-p is relative to the best token."""
        window = self._window(context)
        logits, n, lp, sp = self._buffers(logits)
        ids = np.empty(n, np.int32)
        vals = np.empty(n, np.float32)
        m = lib.llk_sample_candidates(
            lp,
            n,
            ffi.from_buffer("int32_t[]", window),
            window.size,
            self._params,
            sp,
            ffi.from_buffer("int32_t[]", ids),
            ffi.from_buffer("float[]", vals),
        )
        if m < 0:
            raise ValueError("sample: bad arguments")
        return ids[:m].astype(np.int64), vals[:m]

    @property
    def n_window(self) -> int:
        """Tokens of the context the penalties look at (0: none)."""
        return self.settings.penalty_last_n if self.settings.penalized else 0

    def uniforms(self, k: int) -> np.ndarray:
        """The next k draws of this sampler's generator (zeros when greedy): the numbers k calls
        of sample() would use, for a run of up to k tokens made in C (CDecoder.generate). The run
        then says how many it used (`used`), so a run cut short by time leaves the rest for the
        next token: the text of a seed never depends on the machine's speed."""
        if self.settings.greedy:
            return np.zeros(k, np.float64)
        self._before = self._rng.bit_generator.state
        return self._rng.random(k)

    def used(self, n: int) -> None:
        """Of the last uniforms(k), only the first n were drawn for tokens."""
        if self.settings.greedy or self._before is None:
            return
        self._rng.bit_generator.state = self._before
        self._before = None
        if n:
            self._rng.random(n)

    def scratch(self, n_vocab: int) -> np.ndarray:
        """The C chain's scratch buffer for n_vocab logits (kept and reused)."""
        need = int(lib.llk_sample_scratch_bytes(n_vocab, self.settings.penalty_last_n))
        if self._scratch is None or self._scratch.size < need:
            self._scratch = np.empty(need, np.uint8)
        return self._scratch

    @property
    def params(self) -> CPointer:
        """llk_sampler_params * of these settings (for the C generation loop)."""
        return self._params

    def sample(self, logits: np.ndarray, context: Sequence[int] = ()) -> int:
        window = self._window(context)
        logits, n, lp, sp = self._buffers(logits)
        u = 0.0 if self.settings.greedy else float(self._rng.random())
        tok = lib.llk_sample(lp, n, ffi.from_buffer("int32_t[]", window), window.size, self._params, u, sp)
        if tok < 0:
            raise ValueError("sample: bad arguments")
        return int(tok)


_NO_WINDOW = np.zeros(0, np.int32)
