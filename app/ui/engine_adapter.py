"""The real engine behind the worker's small interface (`app.ui.worker.EngineLike`).

`app.engine.Engine` holds the mapped file, tokenizer, chat template, decoder and one session
whose KV cache is reused across turns (a follow-up decodes only what is new). Each reply is an
`app.engine.Chat` turn over the conversation the window sends: when it outgrows the context the
oldest turns after the system prompt are dropped, and inside a long reply the session shifts.
Each conversation's KV state is kept in the cache folder (`app.engine.kvstore`): the worker calls
`save_state()` after a reply and before closing, and a conversation that comes back restores it.
Engine events become the plain dicts the worker batches for the window. Runs only in the
worker thread, except `cancel()`.
"""

from __future__ import annotations

import warnings
from typing import Callable, Iterator

OVERFLOW_TO_POLICY = {"shift": "shift", "stop": "stop"}


def sampler_settings(settings: dict):
    from app.engine.sampler import SamplerSettings

    seed = settings.get("seed", -1)
    return SamplerSettings(
        temperature=max(0.0, float(settings.get("temperature", 0.7))),
        top_k=int(settings.get("top_k", 40)),
        top_p=min(1.0, max(1e-6, float(settings.get("top_p", 0.95)))),
        min_p=min(1.0, max(0.0, float(settings.get("min_p", 0.05)))),
        repeat_penalty=max(1e-3, float(settings.get("repeat_penalty", 1.0))),
        seed=None if seed is None or int(seed) < 0 else int(seed))


class RealEngine:
    def __init__(self):
        self.engine = None
        self.warnings: list[str] = []
        self._chat = None               # the last conversation answered (whose state to save)

    # -- loading -------------------------------------------------------------------------------

    def load(self, path: str, n_ctx: int, n_threads: int, progress: Callable[[float], None],
             kv_type: str = "f16") -> dict:
        from app.engine.engine import Engine

        self.close()
        progress(0.05)
        from app.engine.kvstore import KVStore

        engine = Engine.load(path, n_ctx=int(n_ctx) or None, n_threads=int(n_threads), kv_type=kv_type,
                             kv_store=KVStore())
        try:
            progress(0.9)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                template = engine.chat_template
            self.warnings = [str(w.message) for w in caught]
        except BaseException:
            engine.close()
            raise
        self.engine = engine
        progress(1.0)
        decoder = engine.decoder
        return {"n_ctx": engine.n_ctx, "n_ctx_reason": engine.n_ctx_reason, "kv_type": engine.kv_type,
                "pool_size": engine.n_threads, "isa": getattr(decoder, "isa", ""),
                "kv_cache_bytes": getattr(decoder, "kv_bytes", 0),
                "template_family": getattr(template, "family", None),
                "template_warnings": list(self.warnings)}

    def save_state(self) -> bool:
        """Write the last conversation's KV state to the cache folder (worker thread only)."""
        if self.engine is None or self._chat is None:
            return False
        return self._chat.save_state()

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
        self.engine = None
        self._chat = None

    # -- generation ----------------------------------------------------------------------------

    def generate(self, messages: list[dict], settings: dict) -> Iterator[dict]:
        import time

        from app.engine.engine import Chat
        from app.engine.generate import ContextShifted, Finished, PromptProgress, TextPiece

        if self.engine is None:
            raise RuntimeError("no model is loaded")
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
        turns = [m for m in messages if m["role"] in ("user", "assistant")]
        if not turns or turns[-1]["role"] != "user":
            raise ValueError("the conversation must end with a user message")
        chat = Chat(self.engine, system=system,
                    context_policy=OVERFLOW_TO_POLICY.get(settings.get("overflow", "shift"), "shift"))
        chat.messages = [dict(m) for m in turns[:-1]]
        self._chat = chat
        t0 = time.perf_counter()
        prompt_sent = False
        for ev in chat.send(turns[-1]["content"], sampler_settings(settings),
                            max_tokens=int(settings.get("max_tokens", 512))):
            if isinstance(ev, PromptProgress):
                if ev.done >= ev.total and not prompt_sent:
                    prompt_sent = True
                    yield {"type": "prompt", "prompt_tokens": ev.total,
                           "prompt_seconds": time.perf_counter() - t0}
            elif isinstance(ev, TextPiece):
                if not prompt_sent:
                    prompt_sent = True
                    yield {"type": "prompt", "prompt_tokens": 0, "prompt_seconds": 0.0}
                yield {"type": "token", "text": ev.text}
            elif isinstance(ev, ContextShifted):
                yield {"type": "context_shift", "dropped": int(ev.dropped)}
            elif isinstance(ev, Finished):
                s = ev.stats
                yield {"type": "done", "stats": {
                    "prompt_tokens": s.prompt_tokens, "completion_tokens": s.generated_tokens,
                    "prompt_evaluated": s.prompt_tokens_evaluated,
                    "prompt_tok_s": round(s.prompt_tok_s, 2), "gen_tok_s": round(s.generation_tok_s, 2),
                    "ttft_s": round(s.ttft_s, 4), "stop_reason": ev.stop_reason,
                    "stopped": ev.stop_reason == "cancelled", "peak_rss_bytes": s.peak_rss_bytes,
                    "threads": s.threads, "isa": s.isa}}

    def cancel(self) -> None:
        engine = self.engine
        if engine is not None:
            engine.cancel()

    # -- live figures --------------------------------------------------------------------------

    def pool_counters(self) -> tuple[int, list[int]]:
        pool = getattr(getattr(self.engine, "decoder", None), "pool", None)
        if pool is None:
            return 0, []
        return pool.size, pool.busy_ns()

    def context_used(self) -> tuple[int, int]:
        if self.engine is None:
            return 0, 0
        return self.engine.session.n_past, self.engine.n_ctx


__all__ = ["RealEngine", "sampler_settings"]
