"""Session bookkeeping with a recording fake decoder, and cancellation of the real one."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from app.engine.decoder import DecodeCancelled
from app.engine.session import ContextFullError, GenerationCancelled, Session


class FakeDecoder:
    """Logits = one-hot of (sum of tokens at positions so far) % n_vocab; records each call."""

    def __init__(self, n_ctx=32, n_vocab=50, delay=0.0):
        self.n_ctx, self.n_vocab, self.delay = n_ctx, n_vocab, delay
        self.calls: list[tuple[list[int], int]] = []
        self.cache = [None] * n_ctx
        self._abort = threading.Event()

    def decode(self, tokens, start_pos, all_logits=False):
        self.calls.append((list(tokens), start_pos))
        end = time.monotonic() + self.delay
        while time.monotonic() < end:
            if self._abort.is_set():
                raise DecodeCancelled("aborted")
            time.sleep(0.001)
        for i, t in enumerate(tokens):
            self.cache[start_pos + i] = t
        out = np.zeros(self.n_vocab, np.float32)
        out[sum(self.cache[: start_pos + len(tokens)]) % self.n_vocab] = 1
        return out

    def abort(self):
        self._abort.set()

    def clear_abort(self):
        self._abort.clear()


def test_follow_up_decodes_only_new_tokens():
    d = FakeDecoder()
    s = Session(d, n_batch=4)
    s.feed([1, 2, 3, 4, 5])
    assert d.calls == [([1, 2, 3, 4], 0), ([5], 4)]
    d.calls.clear()
    logits = s.feed([1, 2, 3, 4, 5, 6, 7])
    assert d.calls == [([6, 7], 5)]
    assert int(logits.argmax()) == 28 and s.tokens == [1, 2, 3, 4, 5, 6, 7]
    d.calls.clear()
    s.feed([1, 2, 3, 4, 5, 6, 7])  # all cached: the last token again, for its logits
    assert d.calls == [([7], 6)]
    d.calls.clear()
    s.feed([1, 2, 9, 9])  # diverges at 2: keep 2, decode the rest
    assert d.calls == [([9, 9], 2)] and s.n_past == 4


def test_batches_and_progress():
    d = FakeDecoder()
    s = Session(d, n_batch=4)
    progress = list(s.feed_iter(list(range(1, 11))))
    assert progress == [(4, 10), (8, 10), (10, 10)]
    assert [len(c[0]) for c in d.calls] == [4, 4, 2] and s.last_evaluated == 10


def test_context_full_and_shifted():
    d = FakeDecoder(n_ctx=8)
    s = Session(d, n_batch=8)
    with pytest.raises(ContextFullError):
        s.feed(list(range(9)))
    s.feed(list(range(1, 9)))
    with pytest.raises(ContextFullError):
        s.step(3)
    assert s.shifted(2, 3) == [1, 2, 6, 7, 8]


def test_cancel_from_another_thread_stops_within_one_batch():
    d = FakeDecoder(n_ctx=64, delay=0.05)
    s = Session(d, n_batch=4)
    threading.Timer(0.07, s.cancel).start()
    t = time.monotonic()
    with pytest.raises(GenerationCancelled):
        s.feed(list(range(1, 41)))  # 10 batches of 50 ms
    assert time.monotonic() - t < 0.2
    assert s.n_past == 4  # the finished batch stays, the aborted one does not
    s.clear_cancel()
    s.feed(list(range(1, 6)))
    assert s.n_past == 5


def test_cancel_interrupts_a_real_batch_inside_the_kernels(smollm2_file):
    """One 512-token batch of SmolLM2 takes ~1 s; abort() from another thread ends it early."""
    from app.engine.decoder import CDecoder
    from app.model import config_from_gguf

    cfg = config_from_gguf(smollm2_file)
    with CDecoder(smollm2_file, cfg, 1024, n_threads=2) as d:
        s = Session(d, n_batch=512)
        ids = [int(i) for i in np.random.default_rng(0).integers(100, 40000, 512)]
        t = time.monotonic()
        s.feed(ids[:64])
        t64 = time.monotonic() - t
        timer = threading.Timer(0.05, s.cancel)
        timer.start()
        t = time.monotonic()
        with pytest.raises(GenerationCancelled):
            s.feed(ids)
        elapsed = time.monotonic() - t
        assert elapsed < max(0.5, t64 * 8 * 0.5), (elapsed, t64)
        s.clear_cancel()
        assert s.n_past == 64
        logits = s.feed(ids[:65])
        assert logits.shape == (cfg.n_vocab,)
