"""One loaded model ready to answer: the GGUF file (mapped), its config, tokenizer and chat
template, a C decoder with its KV cache, and a session over it. Open with `Engine.load(path)`.

    with Engine.load(path, n_ctx=2048) as eng:
        req = GenerationRequest(eng.chat_prompt([{"role": "user", "content": "Hi"}]))
        for ev in eng.generate(req): ...

`Chat` keeps a conversation's messages and turns each reply into a generation on the same
session, so a follow-up decodes only the new tokens; when the conversation outgrows the context
it drops the oldest turns after the system prompt (and says so with a ContextShifted event).
"""
from __future__ import annotations

import time
from typing import Iterator

from app import defaults as D
from app.engine import stagelog
from app.engine.decoder import CDecoder
from app.engine.generate import ContextShifted, Event, Finished, GenerationRequest, generate
from app.engine.sampler import SamplerSettings
from app.engine.session import Session
from app.gguf import open_gguf
from app.model import config_from_gguf, require_supported

__all__ = ["Engine", "Chat", "DEFAULT_N_CTX"]

DEFAULT_N_CTX = D.N_CTX


class Engine:
    def __init__(self, path, *, n_ctx: int | None = None, n_threads: int = D.THREADS,
                 kv_type: str = D.KV_TYPE, n_batch: int = D.N_BATCH, isa: str | None = None,
                 speculation: str = "lookup", draft: str | None = None, draft_max: int = 8):
        """speculation: "lookup" (prompt lookup, on by default: it switches itself off where it
        does not pay), "off", or "draft" with `draft` the path of a small model of the same
        vocabulary; draft_max: most tokens guessed per pass (app.engine.speculative)."""
        from app.text import load_tokenizer

        self.path = str(path)
        t0 = time.perf_counter()
        self.file = open_gguf(path)
        map_s = time.perf_counter() - t0
        try:
            require_supported(self.file)
            self.config = config_from_gguf(self.file)
            self.tokenizer = load_tokenizer(self.file)
            n_ctx = min(self.config.n_ctx_train, DEFAULT_N_CTX) if not n_ctx else int(n_ctx)
            t1 = time.perf_counter()
            self.decoder = CDecoder(self.file, self.config, n_ctx, kv_type=kv_type,
                                    n_threads=n_threads, n_batch=n_batch, isa=isa)
            decoder_s = time.perf_counter() - t1
        except BaseException:
            self.file.close()
            raise
        self.session = Session(self.decoder, n_batch=n_batch)
        self._template = None
        self.last_tokenize_s: float | None = None     # of the last raw_prompt / chat_prompt
        self.speculator = None
        try:
            self.set_speculation("draft" if draft else speculation, draft, draft_max, kv_type)
        except BaseException:
            self.close()
            raise
        stagelog.log_model_load(self, map_s, decoder_s)

    def set_speculation(self, mode: str = "lookup", draft: str | None = None, draft_max: int = 8,
                        kv_type: str = "f16") -> None:
        """Switch speculative decoding: "off", "lookup", or "draft" (opens `draft`; a draft whose
        vocabulary differs from this model's is refused with IncompatibleDraftError)."""
        from app.engine.speculative import DraftModel, PromptLookup, Speculator

        if mode not in ("off", "lookup", "draft"):
            raise ValueError(f"speculation must be off, lookup or draft, not {mode!r}")
        old = self.speculator
        if mode == "off":
            self.speculator = None
        elif mode == "lookup":
            self.speculator = Speculator(PromptLookup(), k_max=draft_max)
        else:
            if not draft:
                raise ValueError("speculation \"draft\" needs a draft model")
            self.speculator = Speculator(DraftModel(draft, self.file, self.n_ctx,
                                                    pool=self.decoder.pool, kv_type=kv_type),
                                         k_max=draft_max)
        if old is not None and hasattr(old.proposer, "close"):
            old.proposer.close()

    @classmethod
    def load(cls, path, **kw) -> "Engine":
        return cls(path, **kw)

    @property
    def n_ctx(self) -> int:
        return self.decoder.n_ctx

    @property
    def n_threads(self) -> int:
        return self.decoder.n_threads

    @property
    def chat_template(self):
        if self._template is None:
            from app.text import load_chat_template

            self._template = load_chat_template(self.file, self.tokenizer)
        return self._template

    # -- prompts ------------------------------------------------------------------------------

    def raw_prompt(self, text: str) -> list[int]:
        """`text` tokenized as-is (special-token text stays plain), BOS if the model wants it."""
        t0 = time.perf_counter()
        ids = self.tokenizer.encode(text, add_special=True, parse_special=False)
        self.last_tokenize_s = time.perf_counter() - t0
        return ids

    def chat_prompt(self, messages, add_generation_prompt: bool = True) -> list[int]:
        from app.text import chat_prompt_tokens

        t0 = time.perf_counter()
        ids = chat_prompt_tokens(self.tokenizer, self.chat_template, messages,
                                 add_generation_prompt=add_generation_prompt)
        self.last_tokenize_s = time.perf_counter() - t0
        return ids

    # -- running ------------------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> Iterator[Event]:
        """The events of one generation; its figures go to the stage log when it finishes."""
        tokenize_s, self.last_tokenize_s = self.last_tokenize_s, None
        for ev in generate(self.session, self.tokenizer, request, self.speculator):
            if isinstance(ev, Finished):
                stagelog.log_generation(ev, tokenize_s)
            yield ev

    def cancel(self) -> None:
        """From any thread: the running generation ends with stop reason "cancelled"."""
        self.session.cancel()

    def close(self) -> None:
        spec = getattr(self, "speculator", None)
        if spec is not None and hasattr(spec.proposer, "close"):
            spec.proposer.close()
            self.speculator = None
        self.decoder.close()
        self.file.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Chat:
    """A conversation on an engine: system prompt, alternating turns, context policy "shift" by
    default (oldest turns after the system prompt are dropped when the context fills)."""

    def __init__(self, engine: Engine, system: str | None = None, context_policy: str = D.OVERFLOW,
                 reserve: int = 256):
        self.engine = engine
        self.system = system
        self.messages: list[dict] = []
        self.context_policy = context_policy
        self.reserve = reserve          # tokens kept free for the reply when dropping turns
        self.dropped_turns = 0

    def _all(self, messages) -> list[dict]:
        return ([{"role": "system", "content": self.system}] if self.system else []) + messages

    def _n_keep(self, ids: list[int]) -> int:
        """Tokens of the system part: the rendered system prompt's length (common prefix)."""
        if not self.system:
            return 1 if ids and ids[0] == self.engine.tokenizer.bos_id else 0
        sys_ids = self.engine.chat_prompt(self._all([]), add_generation_prompt=False)
        n = 0
        for a, b in zip(sys_ids, ids):
            if a != b:
                break
            n += 1
        return n

    def send(self, user_text: str, sampler: SamplerSettings | None = None,
             max_tokens: int = D.MAX_TOKENS) -> Iterator[Event]:
        """Add the user's turn, generate the reply (events), and add the reply to the history."""
        self.messages.append({"role": "user", "content": user_text})
        ids = self.engine.chat_prompt(self._all(self.messages))
        limit = self.engine.n_ctx - min(self.reserve, self.engine.n_ctx // 4)
        dropped, n_before = 0, len(ids)
        while len(ids) > limit and self.context_policy == "shift" and len(self.messages) > 1:
            # the oldest exchange after the system prompt goes: a user turn and its reply
            del self.messages[:2 if len(self.messages) > 2 else 1]
            dropped += 1
            ids = self.engine.chat_prompt(self._all(self.messages))
        if dropped:
            self.dropped_turns += dropped
            yield ContextShifted(n_before - len(ids), len(ids), dropped_turns=dropped)
        req = GenerationRequest(tuple(ids), max_tokens=max_tokens,
                                sampler=sampler or SamplerSettings(),
                                context_policy=self.context_policy, n_keep=self._n_keep(ids))
        fin = None
        for ev in self.engine.generate(req):
            if isinstance(ev, Finished):
                fin = ev
            yield ev
        if fin is not None:
            self.messages.append({"role": "assistant", "content": fin.text})
