"""The real engine behind the worker's small interface (`app.ui.worker.EngineLike`).

Loads a GGUF file into a decoder (app.engine), its tokenizer and chat template (app.text), keeps
one session whose KV cache is reused across turns, and turns the engine's events into the plain
dicts the worker batches for the window. Runs only in the worker thread, except `cancel()`.
"""

from __future__ import annotations

import warnings
from typing import Callable, Iterator

from app.errors import UnsupportedModelError

OVERFLOW_TO_POLICY = {"shift": "shift", "stop": "stop"}


class RealEngine:
    def __init__(self):
        self._file = None
        self.decoder = None
        self.session = None
        self.tokenizer = None
        self.template = None
        self.warnings: list[str] = []

    # -- loading -------------------------------------------------------------------------------

    def load(self, path: str, n_ctx: int, n_threads: int, progress: Callable[[float], None]) -> dict:
        from app.engine.decoder import CDecoder
        from app.engine.session import Session
        from app.gguf import open_gguf
        from app.model import config_from_gguf, support_verdict
        from app.text import load_chat_template, load_tokenizer

        self.close()
        progress(0.0)
        f = open_gguf(path)
        try:
            verdict = support_verdict(f)
            if not verdict.supported:
                raise UnsupportedModelError(f"{path}: not supported: " + "; ".join(verdict.reasons))
            cfg = config_from_gguf(f)
            progress(0.15)
            tokenizer = load_tokenizer(f)
            progress(0.45)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                template = load_chat_template(f, tokenizer)
            self.warnings = [str(w.message) for w in caught]
            progress(0.55)
            n_ctx = max(16, min(int(n_ctx), int(cfg.n_ctx_train) or int(n_ctx)))
            decoder = CDecoder(f, cfg, n_ctx, n_threads=int(n_threads))
            progress(0.95)
        except BaseException:
            f.close()
            raise
        self._file, self.decoder, self.tokenizer, self.template = f, decoder, tokenizer, template
        self.session = Session(decoder)
        progress(1.0)
        return {"n_ctx": decoder.n_ctx, "pool_size": decoder.n_threads, "isa": decoder.isa,
                "kv_cache_bytes": getattr(decoder, "kv_bytes", 0),
                "template_family": getattr(template, "family", None),
                "template_warnings": list(self.warnings)}

    def close(self) -> None:
        if self.decoder is not None:
            self.decoder.close()
        if self._file is not None:
            self._file.close()
        self._file = self.decoder = self.session = self.tokenizer = self.template = None

    # -- generation ----------------------------------------------------------------------------

    def _n_keep(self, messages: list[dict], ids: list[int]) -> int:
        """Tokens a context shift never drops: the system prompt's (or just BOS)."""
        from app.text import chat_prompt_tokens

        if messages and messages[0].get("role") == "system":
            try:
                head = chat_prompt_tokens(self.tokenizer, self.template, messages[:1],
                                          add_generation_prompt=False)
            except Exception:
                head = []
            if head and ids[:len(head)] == head and len(head) < self.decoder.n_ctx // 2:
                return len(head)
        bos = getattr(self.tokenizer, "bos_id", None)
        return 1 if ids and bos is not None and ids[0] == bos else 0

    def generate(self, messages: list[dict], settings: dict) -> Iterator[dict]:
        import time

        from app.engine.generate import (ContextShifted, Finished, GenerationRequest, PromptProgress,
                                         TextPiece, generate)
        from app.engine.sampler import SamplerSettings
        from app.text import chat_prompt_tokens

        if self.session is None:
            raise RuntimeError("no model is loaded")
        t0 = time.perf_counter()
        ids = chat_prompt_tokens(self.tokenizer, self.template, messages, add_generation_prompt=True)
        seed = settings.get("seed", -1)
        sampler = SamplerSettings(
            temperature=float(settings.get("temperature", 0.7)), top_k=int(settings.get("top_k", 40)),
            top_p=min(1.0, max(1e-6, float(settings.get("top_p", 0.95)))),
            min_p=float(settings.get("min_p", 0.05)),
            repeat_penalty=float(settings.get("repeat_penalty", 1.0)),
            seed=None if seed is None or int(seed) < 0 else int(seed))
        request = GenerationRequest(
            prompt_ids=tuple(ids), max_tokens=int(settings.get("max_tokens", 512)), sampler=sampler,
            context_policy=OVERFLOW_TO_POLICY.get(settings.get("overflow", "shift"), "shift"),
            n_keep=self._n_keep(messages, ids))
        prompt_sent = False
        for ev in generate(self.session, self.tokenizer, request):
            if isinstance(ev, PromptProgress):
                if ev.done >= ev.total and not prompt_sent:
                    prompt_sent = True
                    yield {"type": "prompt", "prompt_tokens": len(ids), "prompt_evaluated": ev.total,
                           "prompt_seconds": time.perf_counter() - t0}
            elif isinstance(ev, TextPiece):
                if not prompt_sent:
                    prompt_sent = True
                    yield {"type": "prompt", "prompt_tokens": len(ids), "prompt_seconds": 0.0}
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
        session = self.session
        if session is not None:
            session.cancel()

    # -- live figures --------------------------------------------------------------------------

    def pool_counters(self) -> tuple[int, list[int]]:
        pool = getattr(self.decoder, "pool", None)
        if pool is None:
            return 0, []
        return pool.size, pool.busy_ns()

    def context_used(self) -> tuple[int, int]:
        if self.session is None:
            return 0, 0
        return self.session.n_past, self.session.n_ctx


__all__ = ["RealEngine"]
