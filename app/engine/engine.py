"""One loaded model ready to answer: the GGUF file (mapped), its config, tokenizer and chat
template, a C decoder with its KV cache, and a session over it. Open with `Engine.load(path)`.

    with Engine.load(path, n_ctx=2048) as eng:
        req = GenerationRequest(eng.chat_prompt([{"role": "user", "content": "Hi"}]))
        for ev in eng.generate(req): ...

`Chat` keeps a conversation's messages and turns each reply into a generation on the same
session, so a follow-up decodes only the new tokens; when the conversation outgrows the context
it drops the oldest turns after the system prompt (and says so with a ContextShifted event).

With a `KVStore` (kvstore.py), or a `StateKeeper` in front of one (kvkeeper.py: written in the
background, recent states kept in memory), a conversation's KV state is saved under its key
(`Chat.save_state`) and restored when the conversation comes back with the same model, so
reopening it decodes only what is new.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from app import defaults as D
from app.engine import stagelog
from app.engine.decoder import CDecoder
from app.engine.generate import ContextShifted, Event, Finished, GenerationRequest, generate
from app.engine.kvstore import KVStore, model_identity
from app.engine.sampler import SamplerSettings
from app.engine.session import Session
from app.engine.speculative import DraftModel, PromptLookup, Speculator
from app.gguf import open_gguf
from app.errors import LlambdaError, TemplateError
from app.library.preflight import fitting_context
from app.model import config_from_gguf, require_supported

if TYPE_CHECKING:
    from app.engine.kvkeeper import StateKeeper
    from app.text.chat import ChatTemplate  # only imported lazily at run time: jinja2 (see __init__)

__all__ = ["Engine", "Chat", "DEFAULT_N_CTX", "conversation_key"]

log = logging.getLogger(__name__)

DEFAULT_N_CTX = D.N_CTX  # 0: the training length, capped by what fits (fitting_context)


class Engine:
    def __init__(
        self,
        path: str | os.PathLike,
        *,
        n_ctx: int | None = None,
        n_threads: int = D.THREADS,
        kv_type: str = D.KV_TYPE,
        n_batch: int = D.N_BATCH,
        isa: str | None = None,
        kv_store: KVStore | StateKeeper | None = None,
        speculation: str = D.SPECULATION,
        draft: str | None = None,
        draft_max: int = D.DRAFT_MAX,
    ):
        """n_ctx None: the training length, capped by what fits in memory with kv_type;
        kv_store: a KVStore where conversations' KV states are kept (None: not kept);
        speculation: "lookup" (prompt lookup, on by default: it switches itself off where it
        does not pay), "off", or "draft" with `draft` the path of a small model of the same
        vocabulary; draft_max: most tokens guessed per pass (app.engine.speculative)."""
        from app.text import load_tokenizer  # lazy: app.text loads jinja2; `llambda --help` imports the engine

        self.path = str(path)
        t0 = time.perf_counter()
        self.file = open_gguf(path)
        map_s = time.perf_counter() - t0
        try:
            require_supported(self.file)
            self.config = config_from_gguf(self.file)
            self.tokenizer = load_tokenizer(self.file)
            if n_ctx:
                n_ctx, self.n_ctx_reason = int(n_ctx), "as asked"
            else:  # the training length, capped by what fits in memory with this KV type
                n_ctx, self.n_ctx_reason = fitting_context(self.file, kv_type)
            t1 = time.perf_counter()
            self.decoder = CDecoder(
                self.file, self.config, n_ctx, kv_type=kv_type, n_threads=n_threads, n_batch=n_batch, isa=isa
            )
            decoder_s = time.perf_counter() - t1
        except BaseException:
            self.file.close()
            raise
        self.session = Session(self.decoder, n_batch=n_batch)
        self._template: ChatTemplate | None = None
        self.kv_store = kv_store  # a KVStore, or None: states are not kept on disk
        self._model_id: str | None = None
        self.last_tokenize_s: float | None = None  # of the last raw_prompt / chat_prompt
        self.speculator: Speculator | None = None
        try:
            self.set_speculation("draft" if draft else speculation, draft, draft_max, kv_type)
        except BaseException:
            self.close()
            raise
        stagelog.log_model_load(self, map_s, decoder_s)

    def set_speculation(
        self, mode: str = D.SPECULATION, draft: str | None = None, draft_max: int = D.DRAFT_MAX, kv_type: str = "f16"
    ) -> None:
        """Switch speculative decoding: "off", "lookup", or "draft" (opens `draft`; a draft whose
        vocabulary differs from this model's is refused with IncompatibleDraftError)."""
        if mode not in ("off", "lookup", "draft"):
            raise ValueError(f"speculation must be off, lookup or draft, not {mode!r}")
        old = self.speculator
        if mode == "off":
            self.speculator = None
        elif mode == "lookup":
            self.speculator = Speculator(PromptLookup(), k_max=draft_max)
        else:
            if not draft:
                raise ValueError('speculation "draft" needs a draft model')
            self.speculator = Speculator(
                DraftModel(draft, self.file, self.n_ctx, pool=self.decoder.pool, kv_type=kv_type), k_max=draft_max
            )
        if old is not None and hasattr(old.proposer, "close"):
            old.proposer.close()

    @classmethod
    def load(cls, path: str | os.PathLike, **kw: Any) -> "Engine":
        return cls(path, **kw)

    @property
    def n_ctx(self) -> int:
        return self.decoder.n_ctx

    @property
    def kv_type(self) -> str:
        return self.decoder.kv_type

    @property
    def n_threads(self) -> int:
        return self.decoder.n_threads

    @property
    def chat_template(self) -> ChatTemplate:
        if self._template is None:
            from app.text import load_chat_template  # lazy: jinja2 (see __init__)

            self.file.check_unchanged()  # the template is read from the mapping
            self._template = load_chat_template(self.file, self.tokenizer)
        return self._template

    # -- prompts ------------------------------------------------------------------------------

    def raw_prompt(self, text: str) -> list[int]:
        """`text` tokenized as-is (special-token text stays plain), BOS if the model wants it."""
        t0 = time.perf_counter()
        ids = self.tokenizer.encode(text, add_special=True, parse_special=False)
        self.last_tokenize_s = time.perf_counter() - t0
        return ids

    def chat_prompt(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
        """Token ids of `messages` in the model's chat format. When the model's own template
        fails on them within its bounds (too slow, too big, unsafe: app.text.chat), the family
        template takes over for the rest of the session, with a warning (`chat_template.note`);
        a template that refuses the conversation itself (raise_exception) is obeyed."""
        from app.text import chat_prompt_tokens  # lazy: jinja2 (see __init__)
        from app.text.chat import TemplateRaised, fallback_template  # lazy: jinja2

        t0 = time.perf_counter()
        template = self.chat_template
        try:
            ids = chat_prompt_tokens(self.tokenizer, template, messages, add_generation_prompt=add_generation_prompt)
        except TemplateError as e:
            if template.fallback or isinstance(e, TemplateRaised):
                raise
            self._template = fallback_template(self.file, self.tokenizer, str(e), template.name)
            ids = chat_prompt_tokens(
                self.tokenizer, self._template, messages, add_generation_prompt=add_generation_prompt
            )
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

    # -- saved KV states ----------------------------------------------------------------------

    @property
    def model_id(self) -> str | None:
        """The loaded model's identity for saved KV states; None when it can no longer be told:
        the file at `path` was replaced or deleted before it was first needed (the engine goes
        on with the file it mapped, whose identity the new one's would not be)."""
        if self._model_id is None:
            if not self.file.same_file_at_path():
                return None
            self._model_id = model_identity(self.path)
        return self._model_id

    def save_state(self, key: str) -> bool:
        """Save the session's KV state under `key` (no-op without a store or when unchanged):
        the cache image is copied here (kv_read), so with a StateKeeper as the store only that
        copy is made on this thread and the file is written in the background."""
        s = self.session
        if (
            self.kv_store is None
            or s.n_past == 0
            or self.model_id is None
            or self.kv_store.unchanged(self.model_id, key, s.tokens)
        ):
            return False
        image = self.decoder.kv_read(s.n_past)
        return self.kv_store.save(self.model_id, key, self.decoder.kv_signature(), s.tokens, image) is not None

    def restore_state(self, key: str, prompt_ids: Sequence[int]) -> int:
        """Before feeding `prompt_ids`: if the state saved under `key` shares more of them than
        the session already holds, load it. Returns the tokens restored (0: nothing loaded)."""
        s = self.session
        if self.kv_store is None or not prompt_ids or self.model_id is None:
            return 0
        sig = self.decoder.kv_signature()
        saved = self.kv_store.peek(self.model_id, key, sig, self.n_ctx)
        if not saved or _common(saved, prompt_ids) <= s.common_prefix(prompt_ids):
            return 0
        got = self.kv_store.load(self.model_id, key, sig, self.n_ctx)
        if got is None:
            return 0
        tokens, image = got
        if max(tokens) >= self.decoder.n_vocab or min(tokens) < 0:
            log.warning("KV state %r ignored: token ids outside the vocabulary", key)
            return 0
        try:
            s.restore(tokens, image)
        except (ValueError, LlambdaError) as e:
            log.warning("KV state %r ignored: %s", key, e)
            return 0
        log.info("KV state %r restored: %d tokens", key, len(tokens))
        return len(tokens)

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

    def __exit__(self, *exc: object) -> None:
        self.close()


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def conversation_key(system: str | None, first_user_text: str) -> str:
    """A conversation's key for saved KV states: its system prompt and first message. Two
    conversations that open alike share a key; restoring then loads only the tokens both share
    (a state is only ever used for the token prefix it matches), so it can cost time, never
    correctness."""
    h = hashlib.sha256(f"{system or ''}\0{first_user_text}".encode("utf-8", "surrogatepass"))
    return "chat:" + h.hexdigest()[:32]


class Chat:
    """A conversation on an engine: system prompt, alternating turns, context policy "shift" by
    default (oldest turns after the system prompt are dropped when the context fills)."""

    def __init__(self, engine: Engine, system: str | None = None, context_policy: str = D.OVERFLOW, reserve: int = 256):
        self.engine = engine
        self.system = system
        self.messages: list[dict] = []
        self.context_policy = context_policy
        self.reserve = reserve  # tokens kept free for the reply when dropping turns
        self.dropped_turns = 0
        self._state_key: str | None = None

    def _all(self, messages: list[dict]) -> list[dict]:
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

    def send(
        self, user_text: str, sampler: SamplerSettings | None = None, max_tokens: int = D.MAX_TOKENS
    ) -> Iterator[Event]:
        """Add the user's turn, generate the reply (events), and add the reply to the history."""
        self.messages.append({"role": "user", "content": user_text})
        key = self.state_key  # fixed before any turn is dropped
        ids = self.engine.chat_prompt(self._all(self.messages))
        limit = self.engine.n_ctx - min(self.reserve, self.engine.n_ctx // 4)
        dropped, n_before = 0, len(ids)
        while len(ids) > limit and self.context_policy == "shift" and len(self.messages) > 1:
            # the oldest exchange after the system prompt goes: a user turn and its reply
            del self.messages[: 2 if len(self.messages) > 2 else 1]
            dropped += 1
            ids = self.engine.chat_prompt(self._all(self.messages))
        if dropped:
            self.dropped_turns += dropped
            yield ContextShifted(n_before - len(ids), len(ids), dropped_turns=dropped)
        if getattr(self.engine, "kv_store", None) is not None:
            self.engine.restore_state(key, ids)
        req = GenerationRequest(
            tuple(ids),
            max_tokens=max_tokens,
            sampler=sampler or SamplerSettings(),
            context_policy=self.context_policy,
            n_keep=self._n_keep(ids),
        )
        fin = None
        for ev in self.engine.generate(req):
            if isinstance(ev, Finished):
                fin = ev
            yield ev
        if fin is not None:
            self.messages.append({"role": "assistant", "content": fin.text})

    @property
    def state_key(self) -> str:
        """The key of this conversation's saved KV state (see conversation_key), fixed by its
        first user message (dropping old turns does not change it)."""
        if self._state_key is None:
            first = next((m["content"] for m in self.messages if m["role"] == "user"), None)
            if first is None:
                return conversation_key(self.system, "")
            self._state_key = conversation_key(self.system, first)
        return self._state_key

    def save_state(self) -> bool:
        """Save the engine's KV state under this conversation's key (False: nothing written)."""
        if getattr(self.engine, "kv_store", None) is None or not self.messages:
            return False
        return self.engine.save_state(self.state_key)
