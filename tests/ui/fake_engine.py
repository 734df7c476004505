"""A test double of the engine interface the worker expects (app.ui.worker.EngineLike).

Lives only in tests: it streams a scripted reply word by word with a small delay, honours
cancel() from another thread, can raise on load, and can announce a context shift.
"""

from __future__ import annotations

import threading
import time

REPLY = ("Here is **bold** text and code:\n\n```python\nprint('<b>hi</b>')\n```\n\n"
         "<script>alert(1)</script> stays text. " + " ".join(f"w{i}" for i in range(60)))


class FakeEngine:
    def __init__(self, reply: str = REPLY, delay: float = 0.004, load_seconds: float = 0.1,
                 fail_load: str | None = None, shift_after: int | None = None):
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
        self.load_options: dict = {}     # the keyword options of the last load (kv_type, speculation)

    def load(self, path, n_ctx, n_threads, progress, **options):
        self.load_options = dict(options)
        if self.fail_load:
            raise ValueError(self.fail_load)
        for i in range(1, 11):
            time.sleep(self.load_seconds / 10)
            progress(i / 10)
        n_ctx = n_ctx or 4096       # 0: automatic, the real engine picks what fits; here 4096
        self.loaded, self.n_ctx = path, n_ctx
        return {"n_ctx": n_ctx, "pool_size": 2}

    def generate(self, messages, settings):
        self._cancel.clear()
        self.calls.append((messages, settings))
        prompt_tokens = sum(len(m["content"].split()) + 4 for m in messages)
        self.used = prompt_tokens
        yield {"type": "prompt", "prompt_tokens": prompt_tokens, "prompt_seconds": 0.01}
        pieces = self.reply.replace(" ", " \x00").split("\x00")
        for i, piece in enumerate(pieces):
            if self._cancel.is_set():
                break
            if self.shift_after is not None and i == self.shift_after:
                yield {"type": "context_shift", "dropped": 17}
            time.sleep(self.delay)
            self.busy = [b + int(self.delay * 1e9) for b in self.busy]
            self.used += 1
            yield {"type": "token", "text": piece}
        yield {"type": "done", "stats": {"stopped": self._cancel.is_set()}}

    def cancel(self):
        self._cancel.set()

    def pool_counters(self):
        return 2, list(self.busy)

    def context_used(self):
        return self.used, self.n_ctx

    def close(self):
        pass
