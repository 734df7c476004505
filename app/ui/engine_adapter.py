"""The real engine behind the worker's small interface (`app.ui.worker.EngineLike`).

`app.engine.Engine` holds the mapped file, tokenizer, chat template, decoder and one session
whose KV cache is reused across turns (a follow-up decodes only what is new). Each reply is an
`app.engine.Chat` turn over the conversation the window sends: when it outgrows the context the
oldest turns after the system prompt are dropped, and inside a long reply the session shifts.
Each conversation's KV state is kept (`app.engine.kvkeeper`): the worker calls `save_state()` after
a reply, on a conversation switch and before closing; that takes a snapshot here and the file is
written in the background. A conversation that comes back restores its state from memory while
the last few fit the memory budget, else from the cache folder. `close()` waits for the writes.
The replies are the engine's own events (`app.engine.generate`: PromptProgress, TextPiece,
ContextShifted, Finished), which the worker passes on to the window. Runs only in the worker
thread, except `cancel()`.
"""

from __future__ import annotations

import logging
import mmap
import threading
import warnings
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from app import defaults as D
from app.engine.engine import Chat, Engine
from app.engine.generate import Event, Finished, GenerationRequest, PromptProgress
from app.engine.kvkeeper import DEFAULT_RAM_BUDGET_BYTES, StateKeeper
from app.engine.kvstore import KVStore
from app.engine.sampler import SamplerSettings
from app.engine.speculative import draft_memory, library_draft_choices, resolve_draft
from app.errors import LlambdaError, one_line
from app.gguf import open_gguf
from app.library.preflight import fitting_context, preflight

if TYPE_CHECKING:
    from app.text.chat import ChatTemplate

log = logging.getLogger(__name__)

OVERFLOW_TO_POLICY = {"shift": "shift", "stop": "stop"}


def sampler_settings(settings: dict) -> SamplerSettings:
    return SamplerSettings(
        temperature=max(0.0, float(settings.get("temperature", D.TEMPERATURE))),
        top_k=int(settings.get("top_k", D.TOP_K)),
        top_p=min(1.0, max(1e-6, float(settings.get("top_p", D.TOP_P)))),
        min_p=min(1.0, max(0.0, float(settings.get("min_p", D.MIN_P)))),
        repeat_penalty=max(1e-3, float(settings.get("repeat_penalty", D.REPEAT_PENALTY))),
        seed=D.seed_or_none(settings.get("seed", D.SEED)),
    )


class RealEngine:
    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.warnings: list[str] = []
        self._prefetch: tuple[threading.Thread, threading.Event] | None = None
        self._chat: Chat | None = None  # the last conversation answered (whose state to save)
        self._chat_tokens: list[int] | None = None  # the cache when its reply finished
        self.kv: StateKeeper | None = None  # saved KV states: made at the first load, kept across loads
        self._kv_budget: int | None = None  # the disk budget asked for (None: KVStore's default)
        self.reply_notes: dict = {}  # template_facts when the last reply's template gave way

    def _loaded(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("no model is loaded")
        return self.engine

    # -- loading -------------------------------------------------------------------------------

    def load(
        self,
        path: str,
        n_ctx: int,
        n_threads: int,
        progress: Callable[[float], None],
        kv_type: str = "f16",
        speculation: dict | None = None,
    ) -> dict:
        """speculation: {"speculation": off|lookup|draft, "draft": "auto" or a path, "draft_max"}
        (the window's settings; None: the defaults). A draft that cannot be used (none in the
        library, too big for memory with the model, another vocabulary) leaves prompt lookup on,
        and "speculation_note" says why in one line."""
        self._unload()
        progress(0.05)
        spec = {"speculation": D.SPECULATION, "draft": D.DRAFT, "draft_max": D.DRAFT_MAX, **(speculation or {})}
        draft, note, why = None, "", None
        if spec["speculation"] == "draft":
            draft, note, n_ctx, why = plan_draft(path, spec["draft"], int(n_ctx), kv_type)
        mode = spec["speculation"] if spec["speculation"] != "draft" else "lookup"
        engine = Engine.load(
            path,
            n_ctx=int(n_ctx) or None,
            n_threads=int(n_threads),
            kv_type=kv_type,
            kv_store=self._keeper(),
            speculation=mode,
            draft_max=int(spec["draft_max"]),
        )
        try:
            if why is not None:
                engine.n_ctx_reason = why
            if draft:
                try:
                    engine.set_speculation("draft", draft, int(spec["draft_max"]), kv_type)
                except LlambdaError as e:  # another vocabulary, an unsupported file...
                    note = f"The draft model is not used: {one_line(str(e))}"
                    log.warning("draft %s not used: %s", draft, e)
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
        return {
            "n_ctx": engine.n_ctx,
            "n_ctx_reason": engine.n_ctx_reason,
            "kv_type": engine.kv_type,
            "pool_size": engine.n_threads,
            "isa": getattr(decoder, "isa", ""),
            "kv_cache_bytes": getattr(decoder, "kv_bytes", 0),
            "template_family": getattr(template, "family", None),
            "template_warnings": list(self.warnings),
            **template_facts(template),
            "speculation_kind": self.speculation().get("spec_kind", "off"),
            "speculation_note": note,
            "drafts": draft_choices(path),
        }

    def _keeper(self) -> StateKeeper:
        """The saved states' keeper, its memory budget a quarter of the memory free now (1 GiB at
        most: states are tens to hundreds of MB each)."""
        import psutil  # lazy: see app.ui.worker.PRELOAD

        ram = min(DEFAULT_RAM_BUDGET_BYTES, psutil.virtual_memory().available // 4)
        if self.kv is None or self.kv.closed:
            store = KVStore() if self._kv_budget is None else KVStore(budget_bytes=self._kv_budget)
            self.kv = StateKeeper(store, ram_budget_bytes=ram)
        else:
            self.kv.ram_budget_bytes = ram
        return self.kv

    def set_kv_budget(self, budget_bytes: int) -> None:
        """The disk budget of saved KV states (the window's setting), honoured at once."""
        self._kv_budget = max(0, int(budget_bytes))
        if self.kv is not None:
            self.kv.set_budget(self._kv_budget)

    def save_state(self) -> bool:
        """A snapshot of the last conversation's KV state, written in the background (worker
        thread only; the snapshot is a copy of the cache, so what follows cannot change it)."""
        if self.engine is None or self._chat is None:
            return False
        if self.engine.session.tokens != self._chat_tokens:
            # the cache has moved on since that reply (a request of the local server ran on it,
            # or the reply failed half-way): it is not that conversation's state any more
            log.debug("KV state not saved: the cache no longer holds the last reply's conversation")
            return False
        return self._chat.save_state()

    def _unload(self) -> None:
        self._stop_prefetch()  # its views into the mapping must be gone before unmapping
        if self.engine is not None:
            self.engine.close()
        self.engine = None
        self._chat = None
        if self.kv is not None:
            self.kv.forget_memory()  # the states in memory were the old model's

    def close(self) -> None:
        """Unload, and finish writing the saved states (closing the app waits for them)."""
        self._unload()
        if self.kv is not None:
            self.kv.close()

    # -- generation ----------------------------------------------------------------------------

    def generate(self, messages: list[dict], settings: dict) -> Iterator[Event]:
        """One reply to the conversation `messages`: the engine's own events (app.engine.generate),
        starting with an estimate of the prompt (a `PromptProgress` before the first batch)."""
        engine = self._loaded()
        self.reply_notes = {}
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
        turns = [m for m in messages if m["role"] in ("user", "assistant")]
        if settings.get("continue") and turns and turns[-1]["role"] == "assistant":
            yield from self._continue(messages[:1] if system else [], turns, settings)
            return
        if not turns or turns[-1]["role"] != "user":
            raise ValueError("the conversation must end with a user message")
        template = getattr(engine, "_template", None)  # a failing one is replaced in the turn
        chat = Chat(
            engine,
            system=system,
            context_policy=OVERFLOW_TO_POLICY.get(settings.get("overflow", D.OVERFLOW), D.OVERFLOW),
        )
        chat.messages = [dict(m) for m in turns[:-1]]
        self._chat, self._chat_tokens = chat, None
        # What the prompt will cost, said before its first batch (which can take half a minute
        # on a big model): the tokens of the whole conversation, those already in the cache.
        try:
            ids = engine.chat_prompt(([messages[0]] if system else []) + turns)
            if len(ids) <= chat.engine.n_ctx - min(chat.reserve, chat.engine.n_ctx // 4):  # no turn dropped
                reused = min(engine.session.common_prefix(ids), max(0, len(ids) - 1))
                yield PromptProgress(0, len(ids) - reused, reused)
        except Exception:
            pass  # the turn itself reports what is wrong with the conversation
        events = chat.send(
            turns[-1]["content"], sampler_settings(settings), max_tokens=int(settings.get("max_tokens", D.MAX_TOKENS))
        )
        yield from self._reply(events, template)

    def _reply(self, events: Iterator[Event], template: ChatTemplate | None) -> Iterator[Event]:
        """The engine's events, passed on; at the end, what the cache holds (whose state
        `save_state` keeps) and whether the chat template gave way (`reply_notes`)."""
        for ev in events:
            if isinstance(ev, Finished):
                self._chat_tokens = list(self._loaded().session.tokens)
                self.reply_notes = self._template_change(template)
            yield ev

    def _template_change(self, before: ChatTemplate | None) -> dict:
        """template_facts when the model's template gave way to the fallback during this turn."""
        now = getattr(self.engine, "_template", None)
        return {} if now is before or now is None else template_facts(now)

    def _continue(self, system: list[dict], turns: list[dict], settings: dict) -> Iterator[Event]:
        """Go on with the last assistant turn where it stopped (the token limit): the prompt is the
        conversation up to it with the reply so far as the start of the model's turn, so the
        cache already holds nearly all of it."""
        so_far = turns[-1]["content"]
        engine = self._loaded()
        template = getattr(engine, "_template", None)
        chat = Chat(engine, system=system[0]["content"] if system else None)
        chat.messages = [dict(m) for m in turns]  # its key: the system prompt, first message
        self._chat, self._chat_tokens = chat, None
        ids = engine.chat_prompt(system + turns[:-1])
        ids = ids + engine.tokenizer.encode(so_far, add_special=False, parse_special=False)
        n_ctx = engine.n_ctx
        if len(ids) >= n_ctx:
            raise ValueError(
                f"the conversation fills the context ({len(ids)} of {n_ctx} tokens): "
                "start a new chat, or raise the context length in Settings"
            )
        req = GenerationRequest(
            tuple(ids),
            max_tokens=int(settings.get("max_tokens", 512)),
            sampler=sampler_settings(settings),
            context_policy="stop",
        )
        yield from self._reply(engine.generate(req), template)

    # -- reading the weights in ----------------------------------------------------------------

    def prefetch(self, progress: Callable[[float], None]) -> None:
        """Start reading the mapped weights into memory in a background thread (madvise
        WILLNEED, then one read per page), calling `progress(fraction)` from there; returns at
        once. A reply can start meanwhile (it only waits less for the disk); close() stops it."""
        self._stop_prefetch()
        engine = self.engine
        mm = getattr(getattr(engine, "file", None), "_mmap", None)
        packed = getattr(getattr(engine, "decoder", None), "packed_bytes", 0)
        if engine is None or mm is None or packed >= len(mm) // 2:
            # the decoder copied most weights into its packed layout at load and gave those file
            # pages back: they are in memory already, and reading the file in again would hold
            # them twice (the rest is read at first use)
            progress(1.0)
            return
        stop = threading.Event()
        check = getattr(engine.file, "check_unchanged", None)
        thread = threading.Thread(
            target=read_ahead, args=(mm, progress, stop, check), name="llambda-read-ahead", daemon=True
        )
        self._prefetch = (thread, stop)
        thread.start()

    def _stop_prefetch(self) -> None:
        if self._prefetch is not None:
            thread, stop = self._prefetch
            stop.set()
            thread.join()
            self._prefetch = None

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` as plain text (what an attachment costs in the context)."""
        if self.engine is None:
            raise RuntimeError("no model is loaded")
        return len(self.engine.tokenizer.encode(text, add_special=False, parse_special=False))

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

    def speculation(self) -> dict:
        """Figures of speculative decoding in the running reply (empty when it is off)."""
        spec = getattr(self.engine, "speculator", None)
        return spec.figures() if spec is not None else {}

    def context_used(self) -> tuple[int, int]:
        if self.engine is None:
            return 0, 0
        return self.engine.session.n_past, self.engine.n_ctx


def plan_draft(path: str, draft: str, n_ctx: int, kv_type: str) -> tuple[str | None, str, int, str | None]:
    """Before loading `path` with a draft model: (the draft's path or None, a one-line note when it
    is not used, the context, why that context or None). The memory pre-flight counts both
    models, as `llambda generate --draft` does (app.engine.speculative.draft_memory)."""
    try:
        found = resolve_draft(path, draft)
    except (LlambdaError, OSError) as e:  # a draft that is gone, an unreadable library
        return None, f"The draft model is not used: {one_line(str(e))}", n_ctx, None
    if found is None:
        return None, "No model in the library can draft for this one: prompt lookup instead.", n_ctx, None
    why = None
    if not n_ctx:  # the engine's own choice, made here so both models are counted at it
        with open_gguf(path) as f:
            n_ctx, why = fitting_context(f, kv_type)
    verdict, msg = draft_memory(preflight(path, n_ctx, kv_type), found, kv_type)
    if verdict == "refuse":
        return None, f"The draft model is not used: with it, {msg}", n_ctx, why
    return found, "", n_ctx, why


def draft_choices(path: str) -> dict[str, str]:
    """The library's models that can draft for `path`, smallest first, as {path: name} (a dict
    crosses to the window as plain data, in order)."""
    try:
        return {p: n for n, p in library_draft_choices(path)}
    except Exception as e:  # an unreadable library offers no choice, and the load goes on
        log.info("no draft choices: %s", e)
        return {}


def template_facts(template: ChatTemplate | None) -> dict:
    """What the window shows when the model's own chat template is not used although the file
    has one (app.text.chat: it does not compile, or does not render within its bounds):
    "template_status" for the model panel, "template_note" for the notice line."""
    note = getattr(template, "note", "")
    if not note:
        return {}
    return {
        "template_status": f"not used: {note}",
        "template_note": f"This model's chat template cannot be used: {note}.",
    }


READ_AHEAD_CHUNK = 64 << 20  # bytes per step of the read-ahead pass (one progress report each)
PAGE = mmap.PAGESIZE


def read_ahead(
    mm: mmap.mmap, progress: Callable[[float], None], stop: threading.Event, check: Callable[[], None] | None = None
) -> int:
    """Bring a read-only mapping into memory: ask the kernel to read it ahead (WILLNEED), then
    touch one byte per page in chunks (numpy's loop runs without the interpreter lock), so the
    pages are resident when the first reply needs them. Returns the bytes gone through.
    `check()` runs before each chunk: when it raises (the file changed on disk: pages past a
    new end must not be touched), the pass stops there."""
    size = len(mm)
    if hasattr(mm, "madvise") and hasattr(mmap, "MADV_WILLNEED"):
        try:
            mm.madvise(mmap.MADV_WILLNEED)
        except OSError:
            pass
    done = 0
    while done < size and not stop.is_set():
        if check is not None:
            try:
                check()
            except Exception as e:
                log.warning("read-ahead stopped: %s", e)
                break
        n = min(READ_AHEAD_CHUNK, size - done)
        view = np.frombuffer(mm, dtype=np.uint8, count=n, offset=done)
        int(view[::PAGE].sum(dtype=np.uint64))
        del view
        done += n
        progress(done / size)
    if done >= size:
        progress(1.0)
    return done


__all__ = ["RealEngine", "sampler_settings", "read_ahead"]
