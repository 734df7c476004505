"""The one owner of a loaded engine: a thread that runs jobs from a FIFO queue, one at a time.

The HTTP side never touches the engine. It submits a `Job` (a function that turns the engine into
a GenerationRequest, e.g. by rendering the chat template) and reads the job's events from an
asyncio queue; the owner thread builds the request, runs `engine.generate`, and hands every event
back with `loop.call_soon_threadsafe`, so the event loop is never blocked by tokenizing or
decoding. `Job.cancel()` from any thread stops the job: a queued one is skipped, a running one
is aborted inside its current decoder call (within one token).

Not here: HTTP and the OpenAI wire format (app/server/app.py, app/server/openai_wire.py).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from app.engine.generate import Finished, GenerationRequest
from app.errors import one_line

if TYPE_CHECKING:
    from app.engine.engine import Engine

log = logging.getLogger(__name__)

__all__ = ["Job", "JobFailed", "Prepared", "RequestRejected", "JobQueue", "EngineOwner", "ForwardingOwner"]


@dataclass(frozen=True)
class Prepared:
    """The job reached the engine and its request is built (first event of every job that runs)."""

    request: GenerationRequest


@dataclass(frozen=True)
class JobFailed:
    """The job's request could not be built or run: `status` is the HTTP status to answer with."""

    status: int
    message: str
    code: str | None = None
    param: str | None = None


class RequestRejected(Exception):
    """Raised by a job's `prepare` for a request the engine cannot take (a 400 by default)."""

    def __init__(self, message: str, status: int = 400, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


class Job:
    """One request for the engine. `prepare(engine) -> GenerationRequest` runs on the owner
    thread; events (Prepared, the engine's events, JobFailed) arrive on `self.events`, an asyncio
    queue of the loop that created the job; the last one is a Finished or a JobFailed."""

    def __init__(self, prepare: Callable[[Engine], GenerationRequest], loop: asyncio.AbstractEventLoop | None = None):
        self.prepare = prepare
        self.loop = loop or asyncio.get_running_loop()
        self.events: asyncio.Queue = asyncio.Queue()
        self.cancelled = threading.Event()
        self._owner: "JobQueue | None" = None
        self._lock = threading.Lock()
        self._pending: list = []  # pushed, not yet moved to `events`
        self._scheduled = False

    def push(self, event: object) -> None:
        """From the owner thread: hand one event to the asyncio side. Events that come faster
        than the loop takes them travel together (one wake-up of the loop, not one per token)."""
        with self._lock:
            self._pending.append(event)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.cancelled.set()

    def _deliver(self) -> None:
        with self._lock:
            events, self._pending = self._pending, []
            self._scheduled = False
        for ev in events:
            self.events.put_nowait(ev)

    def cancel(self) -> None:
        """From any thread: skip the job if queued, stop it within one token if running."""
        self.cancelled.set()
        owner = self._owner
        if owner is not None:
            owner._cancel_if_running(self)


class JobQueue:
    """The bookkeeping every owner of an engine keeps for the server's jobs: how many wait, which
    one runs (so that cancelling it stops the engine), the last results. `execute(job, engine)`
    runs one job on the calling thread, which must be the engine's owner."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Job | None = None
        self._running_engine: Engine | None = None
        self._waiting = 0
        self._closed = False
        self.jobs_done = 0
        self.finished: collections.deque[Finished] = collections.deque(maxlen=64)  # newest last

    @property
    def queue_length(self) -> int:
        """Jobs waiting plus the one running."""
        with self._lock:
            return self._waiting + (self._running is not None)

    def _enqueue(self, job: Job) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the engine owner is closed")
            job._owner = self
            self._waiting += 1

    def _cancel_if_running(self, job: Job) -> None:
        with self._lock:
            if self._running is job and self._running_engine is not None:
                self._running_engine.cancel()

    def execute(self, job: Job, engine) -> None:  # engine: Engine | None (unannotated: _run_one's call needs narrowing)
        """On the engine's owner thread: run `job` (or tell it why not)."""
        with self._lock:
            self._waiting -= 1
            closed = self._closed
            runs = not (closed or job.cancelled.is_set() or engine is None)
            if runs:
                self._running, self._running_engine = job, engine
        if not runs:
            if engine is None and not closed and not job.cancelled.is_set():
                job.push(JobFailed(503, "no model is loaded"))
            else:
                job.push(JobFailed(503 if closed else 499, "cancelled before it started"))
            return
        try:
            _run_one(job, engine, self.finished)
        finally:
            with self._lock:
                self._running = self._running_engine = None
                self.jobs_done += 1


class EngineOwner(JobQueue):
    """A thread that owns `engine` and runs submitted jobs in order (FIFO), one at a time.

    `engine` needs `generate(request)` (events), `cancel()` (from any thread, stops the running
    generation). `close()` stops the thread after the running job and cancels the queued ones."""

    def __init__(self, engine: Engine, name: str = "llambda-engine"):
        super().__init__()
        self.engine = engine
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> Job:
        self._enqueue(job)
        self._queue.put(job)
        return job

    def close(self, timeout: float = 10.0) -> None:
        with self._lock:
            self._closed = True
            running = self._running
        if running is not None:
            running.cancel()
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                break
            self.execute(job, self.engine)


class ForwardingOwner(JobQueue):
    """Jobs for an engine that another thread already owns (the window's worker): `post(job)`
    hands each job to that thread's own FIFO queue, which calls `execute(job, engine)` in turn,
    between its other work. Nothing here runs the engine on a thread of its own."""

    def __init__(self, post: Callable[[Job], None]):
        super().__init__()
        self._post = post

    def submit(self, job: Job) -> Job:
        self._enqueue(job)
        self._post(job)
        return job

    def close(self) -> None:
        with self._lock:
            self._closed = True
            running = self._running
        if running is not None:
            running.cancel()


def _run_one(job: Job, engine: Engine, finished: collections.deque[Finished]) -> None:
    try:
        request = job.prepare(engine)
    except RequestRejected as e:
        job.push(JobFailed(e.status, str(e), e.code, e.param))
        return
    except Exception as e:  # every failure becomes one event, never a crash
        log.warning("request could not be prepared: %s: %s", type(e).__name__, e)
        job.push(JobFailed(400 if isinstance(e, ValueError) else 500, _one_line(e)))
        return
    job.push(Prepared(request))
    try:
        for event in engine.generate(request):
            if job.cancelled.is_set():
                engine.cancel()  # the generator ends with "cancelled" at its next check
            job.push(event)
            if isinstance(event, Finished):
                finished.append(event)
                return
        job.push(JobFailed(500, "the generation ended without a result"))
    except Exception as e:  # as above: the client gets a failure event, the server goes on
        log.error("generation failed: %s: %s", type(e).__name__, e)
        job.push(JobFailed(500, f"the generation failed: {_one_line(e)}"))


def _one_line(e: BaseException) -> str:
    return one_line(str(e) or type(e).__name__)
