"""The engine owner with a fake engine: one job at a time, in the order submitted; a cancelled
queued job never runs; a cancelled running job stops; a failing job is one event, not a crash."""

from __future__ import annotations

import asyncio
import threading
import time

from app.engine.generate import Finished, GenerationRequest, TextPiece
from app.server.owner import EngineOwner, Job, JobFailed, Prepared, RequestRejected


class FakeEngine:
    """Yields `n` pieces, `delay` seconds apart; records order and any overlap."""

    def __init__(self, n=5, delay=0.005):
        self.n, self.delay = n, delay
        self.running = 0
        self.overlap = False
        self.order: list[int] = []
        self._cancel = threading.Event()

    def cancel(self):
        self._cancel.set()

    def generate(self, req):
        self.running += 1
        self.overlap |= self.running > 1
        self._cancel.clear()
        self.order.append(req.prompt_ids[0])
        ids = []
        reason = "length"
        try:
            for i in range(req.max_tokens):
                if self._cancel.is_set():
                    reason = "cancelled"
                    break
                time.sleep(self.delay)
                ids.append(i)
                yield TextPiece(str(i), i)
        finally:
            self.running -= 1
        yield Finished(reason, "".join(map(str, ids)), tuple(ids), req.prompt_ids)


def request(tag, n=5):
    return lambda engine: GenerationRequest((tag,), max_tokens=n)


async def drain(job):
    events = []
    while True:
        ev = await asyncio.wait_for(job.events.get(), 10)
        events.append(ev)
        if isinstance(ev, (Finished, JobFailed)):
            return events


def test_jobs_run_one_at_a_time_in_order():
    eng = FakeEngine()
    owner = EngineOwner(eng)

    async def main():
        jobs = [owner.submit(Job(request(i))) for i in range(1, 9)]
        return await asyncio.gather(*(drain(j) for j in jobs))

    try:
        results = asyncio.run(main())
    finally:
        owner.close()
    assert eng.order == list(range(1, 9)) and not eng.overlap
    for evs in results:
        assert isinstance(evs[0], Prepared) and evs[-1].stop_reason == "length"
        assert "".join(e.text for e in evs if isinstance(e, TextPiece)) == "01234"
    assert owner.queue_length == 0 and owner.jobs_done == 8


def test_a_cancelled_queued_job_never_runs_and_a_running_one_stops():
    eng = FakeEngine(delay=0.01)
    owner = EngineOwner(eng)

    async def main():
        long = owner.submit(Job(request(1, n=10_000)))
        queued = owner.submit(Job(request(2)))
        assert owner.queue_length == 2
        queued.cancel()
        first = await asyncio.wait_for(long.events.get(), 10)
        assert isinstance(first, Prepared)
        await asyncio.wait_for(long.events.get(), 10)  # a piece: it is running
        long.cancel()
        return await drain(long), await drain(queued)

    try:
        long_events, queued_events = asyncio.run(main())
    finally:
        owner.close()
    assert long_events[-1].stop_reason == "cancelled" and len(long_events[-1].ids) < 10_000
    assert isinstance(queued_events[-1], JobFailed) and eng.order == [1]


def test_a_job_that_cannot_be_prepared_is_one_failure_event():
    eng = FakeEngine()
    owner = EngineOwner(eng)

    def refuse(engine):
        raise RequestRejected("too long", code="context_length_exceeded")

    def crash(engine):
        raise KeyError("boom")

    async def main():
        a = owner.submit(Job(refuse))
        b = owner.submit(Job(crash))
        c = owner.submit(Job(request(3)))
        return await drain(a), await drain(b), await drain(c)

    try:
        a, b, c = asyncio.run(main())
    finally:
        owner.close()
    assert a == [JobFailed(400, "too long", "context_length_exceeded")]
    assert b[0].status == 500 and "boom" in b[0].message
    assert c[-1].stop_reason == "length"  # the owner thread lived on
