"""The inference worker: a QObject living in its own QThread that owns the engine.

The window only sends requests (queued signals into the `on_window_*` slots) and receives
plain-data signals back. Dicts and lists travel as `object`: each is a fresh one, never touched
again by its sender, and it skips Qt's QVariant conversion (which, in PySide6, loses a reference
to True/False on the way back and crashes the interpreter after enough replies). Every exception becomes a `*_failed` signal with a one-line reason.
`cancel()` is the one method the UI thread calls directly: it sets a flag the loops poll and
asks the engine to abort its current step.

The engine is anything with the small interface `EngineLike` (the real adapter is in
`app.ui.engine_adapter`); its events are the engine's dataclasses, and they cross to the window
as they are (frozen, so safe to share). Text pieces are batched: at most one `token_generated`
every `TOKEN_BATCH_S` seconds, so drawing never slows generation.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from PySide6.QtCore import QObject, QThread, Signal, Slot

from app import defaults as D
from app import logs
from app.errors import LlambdaError, one_line
from app.ui.prompt_meter import MIN_TOKENS_FOR_SPEED, PromptMeter, Ticker as _Ticker
from app.ui.qt_fix import emit

if TYPE_CHECKING:
    from app.engine.generate import Event, Finished, TextPiece
    from app.library import ModelLibrary
    from app.library.preflight import PreflightReport
    from app.server.owner import ForwardingOwner, Job

TOKEN_BATCH_S = 0.08  # one view update per 80 ms at most
STATS_EVERY_S = 0.4  # live figures 2.5 times a second while generating
PROGRESS_EVERY_S = 0.05

log = logs.get("worker")
_warned: set[str] = set()


def _warn_once(key: str, what: str, e: BaseException) -> None:
    """A failure that would repeat (live figures 2.5 times a second) is logged once."""
    if key not in _warned:
        _warned.add(key)
        log.warning("%s: %s", what, _reason(e))


class EngineLike(Protocol):
    """What the worker needs from an engine. `generate` yields the engine's own events
    (app.engine.generate): `PromptProgress` (prompt tokens decoded so far, reused from the cache),
    `TextPiece` (a piece of the reply), `ContextShifted` (old tokens dropped), then one `Finished`
    (stop reason and the engine's statistics)."""

    def load(self, path: str, n_ctx: int, n_threads: int, progress: Callable[[float], None]) -> dict: ...
    def generate(self, messages: list[dict], settings: dict) -> Iterator[Event]: ...
    def cancel(self) -> None: ...
    def pool_counters(self) -> tuple[int, list[int]]: ...  # (pool size, busy ns per thread)
    def context_used(self) -> tuple[int, int]: ...  # (tokens in the cache, n_ctx)
    def speculation(self) -> dict: ...  # figures of speculative decoding (a failure: none shown)
    def close(self) -> None: ...


EngineFactory = Callable[[], EngineLike]


# The engine's modules (numpy, the kernels, jinja2...) are imported inside the functions that use
# them ("lazy: see PRELOAD"): the window module loads without them, preload_modules() loads them
# while the window is built, and a module that fails is one line of error where it is used.
PRELOAD = (
    "psutil",
    "jinja2.sandbox",
    "app.gguf",
    "app.model",
    "app.library",
    "app.library.inspect",
    "app.library.preflight",
    "app.text",
    "app.engine.decoder",
    "app.engine.session",
    "app.engine.generate",
    "app.engine.sampler",
    "app.engine.engine",
    "app.ui.engine_adapter",
)


def preload_modules() -> None:
    """Import what the worker will need, on the UI thread before the window shows: a first
    import in the worker (loading C extensions holds the GIL) would freeze the window for a
    moment in the middle of an import or load."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as e:  # reported where it is used, as a one-line error; noted here
            log.warning("preloading %s failed: %s", name, _reason(e))


def default_engine_factory() -> EngineLike:
    """The real engine (app.engine through its adapter)."""
    from app.ui.engine_adapter import RealEngine  # lazy: see PRELOAD

    return RealEngine()


def _reason(e: BaseException) -> str:
    if isinstance(e, LlambdaError):
        return str(e)
    text = str(e) or type(e).__name__
    return one_line(f"{type(e).__name__}: {text}" if not isinstance(e, (OSError, ValueError)) else text)


def _logged(stage: str, e: BaseException) -> str:
    """The one-line reason of a failed stage, logged (the traceback too, when it is a bug)."""
    reason = _reason(e)
    log.warning(
        "%s failed: %s", stage, reason, exc_info=not isinstance(e, (LlambdaError, OSError)), extra={"file_only": True}
    )
    return reason


class ThreadMeter:
    """Average number of pool threads busy between two samples, from busy-ns counters."""

    def __init__(self) -> None:
        self._last: tuple[float, list[int]] | None = None

    def sample(self, size: int, busy_ns: list[int]) -> float:
        now = time.monotonic_ns()
        busy = 0.0
        if self._last is not None and now > self._last[0]:
            then, before = self._last
            if len(before) == len(busy_ns):
                busy = sum(max(0, b - a) for a, b in zip(before, busy_ns)) / (now - then)
        self._last = (now, list(busy_ns))
        return min(float(size), busy)


class EngineWorker(QObject):
    """Owns the engine; lives in an EngineThread. Slots run in the worker thread."""

    # model file: pre-flight -> import -> load
    preflight_done = Signal(object)  # {"path", "verdict", "summary", "messages", ...}
    import_progress = Signal(object, object)  # bytes done, bytes total (Python ints: > 2 GiB)
    import_finished = Signal(object)  # library entry as plain data (+ "duplicate")
    import_failed = Signal(str)  # one-line reason
    load_started = Signal(object)  # {"path", "name"}
    load_progress = Signal(float)  # 0..1
    model_loaded = Signal(object)  # model info (describe) + engine facts
    load_failed = Signal(str)
    starter_progress = Signal(str, object, object)  # stage ("download", "import"), bytes done, total
    starter_failed = Signal(str)  # one-line reason (no network...)
    prefetch_progress = Signal(float)  # 0..1 of the weights read into memory after load
    # generation
    generation_started = Signal(int)  # request id
    prompt_progress = Signal(int, object)  # request id, {"done", "total", "reused", "tok_s", "eta_s"}
    token_generated = Signal(int, object)  # request id, tuple of TextPiece (a batch)
    context_shifted = Signal(int, object)  # request id, ContextShifted
    stats_updated = Signal(object)  # live figures
    # request id, the engine's Finished (None: it ended without one: stopped before it began, or
    # failed after Stop), the worker's figures ({"stopped", "seconds"}, live counters): the
    # window joins them with app.ui.state.reply_timings
    generation_finished = Signal(int, object, object)
    generation_failed = Signal(int, str)  # request id, one-line reason
    tokens_counted = Signal(int, object)  # attachment id, tokens (None: no model to count with)

    def __init__(self, engine_factory: EngineFactory | None = None, library: ModelLibrary | None = None):
        super().__init__()
        self._engine_factory = engine_factory or default_engine_factory
        self._engine: EngineLike | None = None
        self._library = library
        self._cancel = threading.Event()
        self._cancelled_ids: set[int] = set()
        self._meter = ThreadMeter()
        self._meter_lock = threading.Lock()
        self.loaded_path: str | None = None

    # -- called from the UI thread -------------------------------------------------------------

    def cancel(self, request_id: int | None = None) -> None:
        """Stop the import or generation in progress (thread-safe). With a request id, that
        generation stops even if the worker has not started it yet."""
        if request_id is not None:
            self._cancelled_ids.add(request_id)
        self._cancel.set()
        engine = self._engine
        if engine is not None:
            try:
                engine.cancel()
            except Exception as e:  # the worker's own flag still stops the loop
                log.warning("engine.cancel() failed: %s", _reason(e), exc_info=True)

    # -- helpers ---------------------------------------------------------------------------------

    def library(self) -> ModelLibrary:
        if self._library is None:
            from app.library import ModelLibrary  # lazy: see PRELOAD

            self._library = ModelLibrary()
        return self._library

    def engine(self) -> EngineLike:
        if self._engine is None:
            self._engine = self._engine_factory()
        return self._engine

    def live_counters(self) -> dict:
        out: dict = {}
        engine = self._engine
        if engine is None:
            return out
        try:
            with self._meter_lock:  # the worker and its ticker both sample
                size, busy = engine.pool_counters()
                out["pool_size"] = size
                out["threads_busy"] = self._meter.sample(size, busy)
        except Exception as e:  # a live figure missing is not worth stopping for
            _warn_once("pool_counters", "thread counters unavailable", e)
        try:
            used, total = engine.context_used()
            out["n_ctx_used"], out["n_ctx"] = used, total
        except Exception as e:
            _warn_once("context_used", "context figures unavailable", e)
        try:
            out.update(engine.speculation())
        except Exception as e:
            _warn_once("speculation", "speculation figures unavailable", e)
        return out

    # -- model files -----------------------------------------------------------------------------

    @Slot(str, object)
    def on_window_open_requested(self, path: str, options: dict) -> None:
        """Pre-flight, import into the library (or find it there), then load."""
        self._cancel.clear()
        try:
            from app.library.preflight import REFUSE, preflight  # lazy: see PRELOAD

            report = preflight(path, options.get("n_ctx") or None)
        except Exception as e:
            emit(self.import_failed, _logged("import", e))
            return
        facts = _preflight_facts(path, report)
        log.info("preflight: %s verdict=%s", os.path.basename(path), report.verdict)
        emit(self.preflight_done, facts)
        if report.verdict == REFUSE:
            reasons = [m for m in report.messages if "not supported" in m or "does not have enough" in m]
            emit(self.import_failed, one_line(reasons[0] if reasons else report.summary()))
            return
        from app.library import DuplicateModelError  # lazy: see PRELOAD

        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or done >= total:
                last[0] = now
                emit(self.import_progress, int(done), int(total))

        t0 = time.monotonic()
        try:
            entry = self.library().import_model(
                path, progress=progress, cancel=self._cancel, keep_in_place=bool(options.get("keep_in_place"))
            )
            duplicate = False
        except DuplicateModelError as e:
            entry, duplicate = e.entry, True
        except Exception as e:
            emit(self.import_failed, _logged("import", e))
            return
        log.info(
            "import: %s -> library as %s (%s, %.1f MiB, %.2fs)",
            os.path.basename(path),
            entry.name,
            "already there" if duplicate else entry.storage,
            entry.size / 2**20,
            time.monotonic() - t0,
        )
        data = entry.to_json()
        data["duplicate"] = duplicate
        data["file"] = str(entry.file_path(self.library().folder))
        emit(self.import_finished, data)
        self.on_window_load_requested(data["file"], options)

    @Slot(object)
    def on_window_starter_requested(self, options: dict) -> None:
        """Download the starter model into the library (app.starter), then load it."""
        self._cancel.clear()
        last = [0.0]

        def progress(stage: str, done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or done >= total:
                last[0] = now
                emit(self.starter_progress, stage, int(done), int(total))

        try:
            from app.starter import fetch_starter  # lazy: see PRELOAD

            name = fetch_starter(progress)
            path = str(self.library().resolve(name))
        except Exception as e:
            emit(self.starter_failed, _reason(e))
            return
        self.on_window_load_requested(path, options)

    @Slot(str, object)
    def on_window_load_requested(self, path: str, options: dict) -> None:
        self._cancel.clear()
        emit(self.load_started, {"path": path, "name": os.path.basename(path)})
        try:
            from app.library.inspect import describe  # lazy: see PRELOAD

            info = describe(path)
            info["template_status"] = _template_status(path)
            from app.engine.stagelog import file_sha256  # lazy: see PRELOAD

            info["sha256"] = file_sha256(path)  # library files: from the name, no hashing
            engine = self.engine()
            self._set_kv_budget(options)
            last = [0.0]

            def progress(fraction: float) -> None:
                now = time.monotonic()
                if now - last[0] >= PROGRESS_EVERY_S or fraction >= 1.0:
                    last[0] = now
                    emit(self.load_progress, float(fraction))

            trained = int(info.get("context_length") or 0) or 4096  # no length in the file: a usual size
            n_ctx = min(int(options.get("n_ctx") or 0), trained)  # 0: the engine picks what fits
            extra = {"kv_type": options["kv_type"]} if options.get("kv_type", "f16") != "f16" else {}
            spec = {k: options[k] for k in ("speculation", "draft", "draft_max") if k in options}
            if spec and spec != {k: D.ENGINE[k] for k in spec}:  # not the defaults: say so
                extra["speculation"] = spec
            facts = engine.load(path, n_ctx, int(options.get("threads") or 0), progress, **extra)
        except Exception as e:
            self.loaded_path = None
            emit(self.load_failed, _logged("load", e))
            return
        info = {**info, **dict(facts or {})}
        info.setdefault("n_ctx", n_ctx)
        self.loaded_path = path
        self._mark_used(path)
        emit(self.model_loaded, _plain(info))
        emit(self.stats_updated, self.live_counters())
        self._start_prefetch(engine)

    def _mark_used(self, path: str) -> None:
        """The library's "last used" of the model at `path` (when it is one of the library's)."""
        try:
            self.library().mark_used(path)
        except Exception as e:  # a model opened from outside the library has no entry to update
            logging.getLogger(__name__).debug("last use not recorded: %s", e)

    def _start_prefetch(self, engine: EngineLike) -> None:
        """Read the weights into memory in the background (the engine's own thread), so the
        first reply does not wait for the disk; progress goes to `prefetch_progress`."""
        prefetch = getattr(engine, "prefetch", None)
        if prefetch is None:
            return
        last = [0.0]

        def progress(fraction: float) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or fraction >= 1.0:
                last[0] = now
                emit(self.prefetch_progress, float(fraction))

        try:
            prefetch(progress)
        except Exception:
            emit(self.prefetch_progress, 1.0)

    # -- generation ------------------------------------------------------------------------------

    @Slot(int, str)
    def on_window_count_requested(self, attachment_id: int, text: str) -> None:
        """Tokens of an attachment's text with the loaded model's tokenizer."""
        count = getattr(self._engine, "count_tokens", None) if self.loaded_path else None
        try:
            n = int(count(text)) if count is not None else None
        except Exception:
            n = None
        emit(self.tokens_counted, attachment_id, n)

    @Slot(int, object, object)
    def on_window_generate_requested(self, request_id: int, messages: list, settings: dict) -> None:
        self._cancel.clear()
        if self._engine is None or self.loaded_path is None:
            emit(self.generation_failed, request_id, "no model is loaded; drop a GGUF file on the window")
            return
        from app.engine.generate import ContextShifted, Finished, PromptProgress, TextPiece  # lazy: see PRELOAD

        emit(self.generation_started, request_id)
        t0 = time.monotonic()
        stats: dict = {"prompt_tokens": 0, "completion_tokens": 0}  # live, until the engine's own
        finished: Finished | None = None
        buffer: list[TextPiece] = []
        last_flush = last_stats = t0
        first_token_at = None
        gen_start = None
        stopped = False
        cancelled_at = 0.0

        def live() -> dict:
            now = time.monotonic()
            d = dict(stats)
            n = d["completion_tokens"]
            if gen_start is not None and n > 1 and now > gen_start:
                d["gen_tok_s"] = (n - 1) / (now - gen_start)
            if first_token_at is not None:
                d["ttft_s"] = first_token_at - t0
            d.update(self.live_counters())
            return d

        if messages:
            logs.log_text("user", str(messages[-1].get("content", "")))
        if request_id in self._cancelled_ids:  # stopped before it began
            self._cancelled_ids.discard(request_id)
            emit(
                self.generation_finished,
                request_id,
                None,
                {"stopped": True, "prompt_tokens": 0, "completion_tokens": 0},
            )
            return
        prompt = PromptMeter()
        ticker = _Ticker(STATS_EVERY_S, lambda: self._tick(request_id, prompt, live))
        try:
            for ev in self._engine.generate([dict(m) for m in messages], dict(settings)):
                now = time.monotonic()
                first_now = False  # the first token: prompt speed and latency are known now
                if isinstance(ev, PromptProgress):

                    def publish(figures: dict) -> None:
                        emit(self.prompt_progress, request_id, figures)
                        stats.update(prompt_tokens=ev.prompt_tokens, prompt_evaluated=ev.done, prompt_reused=ev.reused)
                        emit(self.stats_updated, {**live(), "prompt": figures})

                    prompt.update(ev.done, ev.total, ev.reused, publish)
                    last_stats = now
                    if ev.done < ev.total:
                        continue
                    prompt.finish()  # the prompt is read
                    if ev.seconds > 0 and ev.done >= MIN_TOKENS_FOR_SPEED:
                        stats["prompt_tok_s"] = ev.done / ev.seconds  # reused tokens cost nothing
                elif isinstance(ev, TextPiece):
                    prompt.finish()
                    if first_token_at is None:
                        first_token_at = gen_start = now
                        first_now = True
                    stats["completion_tokens"] += 1
                    buffer.append(ev)
                elif isinstance(ev, ContextShifted):
                    if buffer:
                        emit(self.token_generated, request_id, tuple(buffer))
                        buffer.clear()
                    emit(self.context_shifted, request_id, ev)
                elif isinstance(ev, Finished):
                    finished = ev
                if buffer and now - last_flush >= TOKEN_BATCH_S:
                    emit(self.token_generated, request_id, tuple(buffer))
                    buffer.clear()
                    last_flush = now
                if now - last_stats >= STATS_EVERY_S or first_now:
                    emit(self.stats_updated, live())
                    last_stats = now
                if self._cancel.is_set() or request_id in self._cancelled_ids:
                    # The engine ends the stream itself; asking again covers a stop that came
                    # before the engine's loop began. One that ignores it is left after 5 s.
                    if not stopped:
                        stopped, cancelled_at = True, now
                    self._engine.cancel()
                    if now - cancelled_at > 5.0:
                        break
        except Exception as e:
            ticker.stop()
            if buffer:
                emit(self.token_generated, request_id, tuple(buffer))
            if self._cancel.is_set() or request_id in self._cancelled_ids:
                stopped = True
                self._cancelled_ids.discard(request_id)
            else:
                emit(self.generation_failed, request_id, _logged("generation", e))
                return
        ticker.stop()
        if buffer:
            emit(self.token_generated, request_id, tuple(buffer))
        self._cancelled_ids.discard(request_id)
        figures = live()
        figures["stopped"] = stopped
        figures["seconds"] = time.monotonic() - t0
        figures["threads_busy"] = 0.0
        figures["prompt"] = None  # the prompt's progress line is over
        emit(self.stats_updated, figures)
        figures.update(getattr(self._engine, "reply_notes", None) or {})  # the template gave way
        emit(self.generation_finished, request_id, finished, figures)
        self._save_state()

    def _save_state(self) -> None:
        """The conversation's KV state kept (a reopened conversation then decodes only what is
        new): here, in the engine's thread, only a snapshot is taken (a copy of the cache); the
        engine writes it to the cache folder in the background. A failure only costs that."""
        save = getattr(self._engine, "save_state", None)
        if save is not None:
            try:
                save()
            except Exception:
                logging.getLogger(__name__).warning("KV state not saved", exc_info=True)

    @Slot()
    def on_window_conversation_switched(self) -> None:
        """Another conversation is shown: the one answered last keeps its state (a no-op when
        nothing changed since its reply was saved)."""
        self._save_state()

    @Slot(object)
    def on_window_kv_budget_changed(self, budget_mb: int) -> None:
        """The disk budget of saved KV states changed in the settings: honoured now."""
        self._set_kv_budget({"kv_budget_mb": budget_mb})

    def _set_kv_budget(self, options: dict) -> None:
        setter = getattr(self._engine, "set_kv_budget", None)
        if setter is None or options.get("kv_budget_mb") is None:
            return
        try:
            setter(int(options["kv_budget_mb"]) << 20)
        except Exception as e:  # the store keeps its budget; the states are only a cache
            log.warning("KV cache budget not changed: %s", _reason(e))

    # -- the local server (app/server): its requests queue here with the window's (FIFO) ----------

    @Slot(object, object)
    def on_server_job_requested(self, owner: ForwardingOwner, job: Job) -> None:
        """Run one request of the local server on this thread's engine, in turn."""
        engine = getattr(self._engine, "engine", None) if self.loaded_path else None
        owner.execute(job, engine)

    def _tick(self, request_id: int, prompt: "PromptMeter", live: Callable[[], dict]) -> None:
        """From the ticker thread, while a generation runs: the live figures (threads busy while
        a long prompt batch is in C), and the prompt's estimate between its batches."""

        def publish(figures: dict) -> None:
            emit(self.prompt_progress, request_id, figures)
            emit(self.stats_updated, {**live(), "prompt": figures})

        prompt.estimate(publish)  # None while replying: the loop sends figures with the tokens

    @Slot()
    def on_window_closing(self) -> None:
        if self._engine is not None:
            self._save_state()
            try:
                self._engine.close()
            except Exception as e:  # closing anyway: the process or the next model goes on
                log.warning("closing the engine failed: %s", _reason(e), exc_info=True)
            self._engine = None


def _template_status(path: str) -> str:
    try:
        from app.gguf import open_gguf  # lazy: see PRELOAD
        from app.library.preflight import chat_template_status

        with open_gguf(path) as f:
            status, message = chat_template_status(f)
        return "ok" if status == "ok" else message.split(": ", 1)[-1]
    except Exception as e:
        log.info("chat template status of %s unknown: %s", os.path.basename(path), _reason(e))
        return "unknown"


def _preflight_facts(path: str, report: PreflightReport) -> dict:
    d: dict[str, object] = {"path": path, "name": os.path.basename(path)}
    d.update(report.to_json())
    try:
        from app.library import describe_model  # lazy: see PRELOAD

        m = describe_model(path)
        d.update(
            {
                "model_name": m.name,
                "architecture": m.architecture,
                "n_params": m.n_params,
                "quantization": m.quantization,
            }
        )
    except Exception as e:  # the pre-flight report names the file's problem itself
        log.info("no header facts for %s: %s", os.path.basename(path), _reason(e))
    try:
        d["file_size"] = os.path.getsize(path)
    except OSError:
        pass
    return _plain(d)


def _plain(d: dict) -> dict:
    """Only plain data crosses threads."""
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[k] = v
        elif isinstance(v, (list, tuple)):
            out[k] = [x if isinstance(x, (str, int, float, bool)) else str(x) for x in v]
        elif isinstance(v, dict):
            out[k] = _plain(v)
        else:
            out[k] = str(v)
    return out


class EngineThread(QThread):
    """The QThread hosting an EngineWorker; `stop()` cancels, closes the engine and joins."""

    # The UI thread shares the GIL with this one. Python hands the GIL over every 5 ms by default,
    # and one UI event needs it several times, so while the worker ran Python (reading a GGUF
    # header, compiling a chat template) the window stalled 40-60 ms (measured on a Zen 3); with
    # 1 ms those stalls are gone. The engine's own work runs in C without the GIL: no cost there.
    GIL_SWITCH_S = 0.001

    def __init__(self, worker: EngineWorker, parent: QObject | None = None):
        super().__init__(parent)
        if sys.getswitchinterval() > self.GIL_SWITCH_S:
            sys.setswitchinterval(self.GIL_SWITCH_S)
        self.setObjectName("llambda-engine")
        self.worker = worker
        worker.moveToThread(self)

    def stop(self, timeout_ms: int = 5000) -> None:
        self.worker.cancel()
        self.quit()
        if not self.wait(timeout_ms):
            self.terminate()
            self.wait(1000)
        try:
            self.worker.on_window_closing()
        except Exception as e:
            log.warning("stopping the engine thread: %s", _reason(e), exc_info=True)


__all__ = [
    "EngineLike",
    "EngineWorker",
    "EngineThread",
    "ThreadMeter",
    "default_engine_factory",
    "preload_modules",
    "TOKEN_BATCH_S",
]
