"""What the KV cache holds, and feeding it: a session remembers the tokens at positions
0..n_past-1 so a follow-up turn decodes only what is new (the longest matching prefix is kept),
processes prompts in batches, and makes room when the context is full (drop tokens after the
first n_keep and renumber the rest).
Not here: sampling and text (generate.py); the decoder itself (decoder.py).
"""

from __future__ import annotations

import threading
import time
from typing import Iterator, Sequence

import numpy as np

from app.engine.decoder import DecodeCancelled, Decoder
from app.engine.sampler import Sampler
from app.errors import LlambdaError

__all__ = ["Session", "ContextFullError", "GenerationCancelled"]


class ContextFullError(LlambdaError, ValueError):
    """The tokens do not fit in the context and the policy says stop."""


class GenerationCancelled(LlambdaError):
    """A stop request arrived (between batches, or inside one through the decoder's abort)."""


class Session:
    """KV-cache bookkeeping over one decoder. Not thread-safe except `cancel()`."""

    def __init__(self, decoder: Decoder, n_batch: int = 512, shift_in_place: bool = True):
        if n_batch < 1:
            raise ValueError("n_batch must be >= 1")
        self.decoder = decoder
        self.n_ctx = decoder.n_ctx
        self.n_batch = n_batch
        # True: dropping tokens moves the later keys in the cache (llama.cpp's context shift:
        # fast, but those keys and values were computed with the dropped tokens in view, so the
        # result is close to, not equal to, decoding the shortened text afresh). False: the
        # tokens after a dropped block are decoded again (exact, costs prompt processing).
        self.shift_in_place = shift_in_place
        self.tokens: list[int] = []  # the tokens whose K/V the cache holds, position = index
        self._cancel = threading.Event()
        self.logits: np.ndarray | None = None  # after the last token fed
        self.last_evaluated = 0

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def reset(self) -> None:
        self.tokens = []

    # -- cancel (from any thread) -------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the running feed/step within one batch (the decoder's kernels stop too)."""
        self._cancel.set()
        self.decoder.abort()

    def clear_cancel(self) -> None:
        self._cancel.clear()
        self.decoder.clear_abort()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            raise GenerationCancelled("generation cancelled")

    # -- feeding ------------------------------------------------------------------------------

    def common_prefix(self, ids: Sequence[int]) -> int:
        n = min(len(ids), len(self.tokens))
        if n == 0:
            return 0
        a = np.asarray(self.tokens[:n], dtype=np.int64)
        b = np.asarray(ids[:n], dtype=np.int64)
        diff = np.flatnonzero(a != b)
        return int(diff[0]) if diff.size else n

    def feed(self, ids: Sequence[int]) -> np.ndarray:
        """Make the cache hold exactly `ids` and return the logits after the last one.

        Reuses the longest prefix already in the cache (at least the last token is decoded again,
        for its logits) and decodes the rest in batches of n_batch. Raises ContextFullError if
        len(ids) > n_ctx, GenerationCancelled on cancel()."""
        for _ in self.feed_iter(ids):
            pass
        assert self.logits is not None  # feed_iter decodes at least the last token
        return self.logits

    def feed_iter(self, ids: Sequence[int]) -> Iterator[tuple[int, int]]:
        """`feed` one batch at a time: yields (tokens done, tokens to decode) after each batch;
        the logits are in `self.logits` at the end, the count decoded in `self.last_evaluated`.

        When `ids` is the cache with a block removed after the common prefix (a chat that dropped
        its oldest turns), the block is dropped from the cache instead (keys re-rotated) and only
        what follows the reused part is decoded."""
        ids = [int(t) for t in ids]
        if not ids:
            raise ValueError("feed: no tokens")
        if len(ids) > self.n_ctx:
            raise ContextFullError(f"{len(ids)} tokens do not fit in the context of {self.n_ctx}")
        p = self.common_prefix(ids)
        gap = self._dropped_block(ids, p)
        if gap:
            self.drop(p, gap)
        keep = min(self.common_prefix(ids), len(ids) - 1)
        del self.tokens[keep:]
        todo = ids[keep:]
        total = len(todo)
        self.last_evaluated = 0
        for b in range(0, total, self.n_batch):
            self._check_cancel()
            chunk = todo[b : b + self.n_batch]
            try:
                self.logits = self.decoder.decode(chunk, self.n_past)
            except DecodeCancelled:
                raise GenerationCancelled("generation cancelled") from None
            self.tokens.extend(chunk)
            self.last_evaluated += len(chunk)
            yield self.last_evaluated, total

    def step(self, token: int) -> np.ndarray:
        """Append one token (one decode call) and return the logits after it."""
        if self.n_past >= self.n_ctx:
            raise ContextFullError(f"the context of {self.n_ctx} tokens is full")
        self._check_cancel()
        try:
            logits = self.decoder.decode([int(token)], self.n_past)
        except DecodeCancelled:
            raise GenerationCancelled("generation cancelled") from None
        self.tokens.append(int(token))
        return logits

    def step_all(self, tokens: Sequence[int]) -> np.ndarray:
        """Append several tokens in one decode call and return the logits after each of them,
        (len(tokens), n_vocab): scoring a speculative guess in one pass over the weights."""
        if self.n_past + len(tokens) > self.n_ctx:
            raise ContextFullError(f"{len(tokens)} more tokens do not fit in the context of {self.n_ctx}")
        self._check_cancel()
        try:
            rows = self.decoder.decode([int(t) for t in tokens], self.n_past, all_logits=True)
        except DecodeCancelled:
            raise GenerationCancelled("generation cancelled") from None
        self.tokens.extend(int(t) for t in tokens)
        return rows

    def rollback(self, n: int) -> None:
        """Forget the newest n tokens of the cache (a guess the model did not confirm, a run cut
        short by a stop string): their positions are free and the next decode overwrites them."""
        if n < 0 or n > self.n_past:
            raise ValueError(f"rollback: {n} tokens of {self.n_past}")
        del self.tokens[self.n_past - n :]

    def sample_run(
        self,
        logits: np.ndarray,
        sampler: Sampler,
        max_tokens: int,
        stop_ids: Sequence[int] = (),
        max_seconds: float = 0.03,
    ) -> tuple[list[int], float, bool]:
        """Tokens sampled from `logits` (those after the cache's last token) and decoded one
        after another, up to max_tokens, a token of stop_ids or max_seconds: (tokens, seconds
        spent sampling, cancelled). Every token but the last is now in the cache; the caller
        decodes the last with step() if it goes on. The C decoder makes the whole run in one call
        (no Python, no interpreter lock per token); other decoders go through this loop."""
        if self.n_past + max_tokens - 1 > self.n_ctx:
            raise ContextFullError(f"{max_tokens} more tokens do not fit in the context of {self.n_ctx}")
        self._check_cancel()
        run = getattr(self.decoder, "generate", None)
        if run is not None:
            toks, ts, cancelled = run(logits, self.n_past, self.tokens, sampler, max_tokens, stop_ids, max_seconds)
            self.tokens.extend(toks[:-1])
            return toks, ts, cancelled
        stops = frozenset(stop_ids)
        toks, ts, t0 = [], 0.0, time.perf_counter()
        while True:
            a = time.perf_counter()
            toks.append(sampler.sample(logits, self.tokens))
            b = time.perf_counter()
            ts += b - a
            if toks[-1] in stops or len(toks) == max_tokens or b - t0 >= max_seconds:
                return toks, ts, False
            try:
                logits = self.decoder.decode([toks[-1]], self.n_past)
            except DecodeCancelled:
                return toks, ts, True
            self.tokens.append(toks[-1])

    MIN_REUSE = 16  # tokens a dropped block must leave reusable to be worth a shift

    def _dropped_block(self, ids: list[int], p: int) -> int:
        """n > 0 if cache[p + n:] continues as ids[p:] for at least MIN_REUSE tokens."""
        rest = len(self.tokens) - p
        if (
            rest <= self.MIN_REUSE
            or len(ids) - p < self.MIN_REUSE
            or not self.shift_in_place
            or not hasattr(self.decoder, "kv_shift")
        ):
            return 0
        cache = np.asarray(self.tokens[p:], dtype=np.int64)
        want = np.asarray(ids[p : p + self.MIN_REUSE], dtype=np.int64)
        for n in np.flatnonzero(cache[1:] == want[0])[:64] + 1:
            tail = cache[n : n + self.MIN_REUSE]
            if tail.size == self.MIN_REUSE and (tail == want).all():
                return int(n)
        return 0

    def drop(self, p0: int, n_drop: int) -> None:
        """Forget cache positions [p0, p0 + n_drop); later tokens move down. Where the decoder
        cannot move them (see CDecoder.kv_shift), they are forgotten too and decoded again by the
        next feed."""
        p0 = max(0, min(p0, self.n_past))
        n_drop = max(0, min(n_drop, self.n_past - p0))
        if n_drop == 0:
            return
        kv_shift = getattr(self.decoder, "kv_shift", None)  # not every decoder can (Decoder)
        if self.shift_in_place and kv_shift and kv_shift(p0, n_drop, self.n_past):
            del self.tokens[p0 : p0 + n_drop]
        else:
            del self.tokens[p0:]

    # -- saved states (kvstore.py) --------------------------------------------------------------

    def restore(self, tokens: Sequence[int], image: np.ndarray | bytes) -> None:
        """Make the cache hold `tokens` from a saved image of their positions (decoder.kv_read):
        the next feed then decodes only what follows them."""
        tokens = [int(t) for t in tokens]
        if not tokens or len(tokens) > self.n_ctx:
            raise ValueError(f"restore: {len(tokens)} tokens for a context of {self.n_ctx}")
        self.tokens = []  # if kv_write fails, the cache claims nothing
        self.decoder.kv_write(image, len(tokens))
        self.tokens = tokens

    def shifted(self, n_keep: int, n_discard: int) -> list[int]:
        """The token list after dropping n_discard tokens that follow the first n_keep (what
        `feed` then re-decodes from position n_keep on)."""
        n_keep = max(0, min(n_keep, self.n_past))
        n_discard = max(0, min(n_discard, self.n_past - n_keep))
        return self.tokens[:n_keep] + self.tokens[n_keep + n_discard :]
