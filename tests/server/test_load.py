"""Bounded load on loopback: several clients at once, some leaving mid-stream, some sending
garbage. Every well-formed request is answered, every bad one gets a 400, the engine owner ends
idle and alive. The default run does a small round; the slow one 8 clients x 20 requests and
checks the process's memory comes back to its baseline (within 5%). The same load on the
window's server: test_window_load.py."""

from __future__ import annotations

import httpx
import pytest

from tests.server import loadgen
from tests.server.conftest import wait_idle


def run_load(served, clients: int, per_client: int) -> list[tuple[str, bool]]:
    return loadgen.run_load(served.v1, clients, per_client)


def check_alive(served) -> None:
    wait_idle(served.owner, 60)
    assert served.owner._thread.is_alive()
    assert httpx.get(served.url + "/health").json() == {"status": "ok", "queue": 0}


def test_small_load_every_well_formed_request_answered(served):
    results = run_load(served, clients=4, per_client=3)
    assert all(ok for _, ok in results), results
    assert {kind for kind, _ in results} == {"ok", "cancel", "garbage"}
    check_alive(served)


def settled_rss() -> int:
    """The process's resident memory after garbage collection, with freed heap handed back to
    the system where glibc can (else RSS counts what the allocator merely keeps for reuse)."""
    import ctypes
    import ctypes.util
    import gc

    from app.engine.stats import current_rss_bytes

    gc.collect()
    try:
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        pass
    return current_rss_bytes()


@pytest.mark.slow
def test_load_8_clients_x_20_requests_and_memory_back_to_baseline(served):
    run_load(served, clients=8, per_client=8)  # warm-up: pools, arenas, first pages
    check_alive(served)
    before = settled_rss()
    results = run_load(served, clients=8, per_client=20)
    assert all(ok for _, ok in results), [r for r in results if not r[1]]
    check_alive(served)
    after = settled_rss()
    assert abs(after - before) <= 0.05 * before, (before, after)
