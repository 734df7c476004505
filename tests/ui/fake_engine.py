"""A test double of the engine interface the worker expects (app.ui.worker.EngineLike).

Lives only in tests: it streams a scripted reply word by word with a small delay, honours
cancel() from another thread, can raise on load, and can announce a context shift. Its events
are the engine's own dataclasses (app.engine.generate), as the real adapter's are.
"""

from __future__ import annotations

import threading
import time

from app.engine.generate import ContextShifted, Finished, PromptProgress, TextPiece
from app.engine.stats import GenerationStats

REPLY = (
    "Here is **bold** text and code:\n\n```python\nprint('<b>hi</b>')\n```\n\n"
    "<script>alert(1)</script> stays text. " + " ".join(f"w{i}" for i in range(60))
)


class FakeEngine:
    def __init__(
        self,
        reply: str = REPLY,
        delay: float = 0.004,
        load_seconds: float = 0.1,
        fail_load: str | None = None,
        shift_after: int | None = None,
    ):
        self.reply = reply
        self.delay = delay
        self.load_seconds = load_seconds
        self.fail_load = fail_load
        self.shift_after = shift_after
        self._cancel = threading.Event()
        self.loaded = None
        self.n_ctx = 0
        self.used = 0
        self.calls: list[tuple[list, dict]] = []
        self.busy = [0, 0]
        self.load_options: dict = {}  # the keyword options of the last load (kv_type, speculation)

    def load(self, path, n_ctx, n_threads, progress, **options):
        self.load_options = dict(options)
        if self.fail_load:
            raise ValueError(self.fail_load)
        for i in range(1, 11):
            time.sleep(self.load_seconds / 10)
            progress(i / 10)
        n_ctx = n_ctx or 4096  # 0: automatic, the real engine picks what fits; here 4096
        self.loaded, self.n_ctx = path, n_ctx
        return {"n_ctx": n_ctx, "pool_size": 2}

    def generate(self, messages, settings):
        """The engine's own events, as app.engine.generate makes them."""
        self._cancel.clear()
        self.calls.append((messages, settings))
        prompt_tokens = sum(len(m["content"].split()) + 4 for m in messages)
        self.used = prompt_tokens
        t0 = time.perf_counter()
        yield PromptProgress(prompt_tokens, prompt_tokens, 0, 0.01)
        pieces = self.reply.replace(" ", " \x00").split("\x00")
        ids: list[int] = []
        t_first = None
        for i, piece in enumerate(pieces):
            if self._cancel.is_set():
                break
            if self.shift_after is not None and i == self.shift_after:
                yield ContextShifted(17, self.used - 17)
            time.sleep(self.delay)
            t_first = t_first or time.perf_counter()
            self.busy = [b + int(self.delay * 1e9) for b in self.busy]
            self.used += 1
            ids.append(i)
            yield TextPiece(piece, i)
        stats = GenerationStats(
            prompt_tokens=prompt_tokens,
            prompt_tokens_evaluated=prompt_tokens,
            generated_tokens=len(ids),
            prompt_s=0.01,
            generation_s=time.perf_counter() - t_first if t_first else 0.0,
            ttft_s=t_first - t0 if t_first else 0.0,
            threads=2,
            n_ctx=self.n_ctx,
        )
        reason = "cancelled" if self._cancel.is_set() else "eog"
        yield Finished(reason, "".join(pieces[: len(ids)]), tuple(ids), (), stats)

    def cancel(self):
        self._cancel.set()

    def pool_counters(self):
        return 2, list(self.busy)

    def context_used(self):
        return self.used, self.n_ctx

    def close(self):
        pass


def finished(
    text: str, n_tokens: int, stop_reason: str = "eog", prompt_tokens: int = 0, evaluated: int | None = None
) -> Finished:
    """A `Finished` for a scripted reply of `n_tokens` tokens (ids 0..n-1)."""
    stats = GenerationStats(
        prompt_tokens=prompt_tokens,
        generated_tokens=n_tokens,
        prompt_tokens_evaluated=prompt_tokens if evaluated is None else evaluated,
    )
    return Finished(stop_reason, text, tuple(range(n_tokens)), (), stats)
