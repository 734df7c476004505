"""Bounded load on loopback: several clients at once, some leaving mid-stream, some sending
garbage. Every well-formed request is answered, every bad one gets a 400, the engine owner ends
idle and alive. The default run does a small round; the slow one 8 clients x 20 requests and
checks the process's memory comes back to its baseline (within 5%)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from tests.server.conftest import wait_idle

GARBAGE = [
    b"{",
    b'{"messages": [{"role": "robot", "content": "x"}]}',
    b"\x00\xff" * 50,
    b'{"messages": [{"role": "user", "content": "x"}], "n": 2}',
    b'{"prompt": 7}',
]


def one_request(url: str, kind: int, k: int) -> tuple[str, bool]:
    """(what was asked, whether the answer was right)."""
    chat = {
        "messages": [{"role": "user", "content": f"Count to {k % 5 + 2}."}],
        "max_tokens": 6,
        "temperature": 0.5,
        "seed": k,
    }
    with httpx.Client(timeout=120) as c:
        if kind == 0:  # streamed chat, read to the end
            with c.stream("POST", url + "/chat/completions", json=dict(chat, stream=True)) as r:
                lines = [ln for ln in r.iter_lines() if ln]
            reasons = [json.loads(ln[6:])["choices"][0]["finish_reason"] for ln in lines[1:-1]]
            return "ok", r.status_code == 200 and lines[-1] == "data: [DONE]" and reasons[-1] in ("stop", "length")
        if kind == 1:  # plain completion
            r = c.post(url + "/completions", json={"prompt": "One, two,", "max_tokens": 5, "seed": k})
            return "ok", r.status_code == 200 and r.json()["choices"][0]["finish_reason"] in ("stop", "length")
        if kind == 2:  # leaves after the first piece
            body = dict(chat, stream=True, max_tokens=200, ignore_eos=True)
            with c.stream("POST", url + "/chat/completions", json=body) as r:
                for ln in r.iter_lines():
                    if ln.startswith("data: {"):
                        break
            return "cancel", True
        r = c.post(
            url + "/chat/completions", content=GARBAGE[k % len(GARBAGE)], headers={"Content-Type": "application/json"}
        )
        return "garbage", r.status_code == 400 and "error" in r.json()


def run_load(served, clients: int, per_client: int) -> list[tuple[str, bool]]:
    results: list[tuple[str, bool]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        for j in range(per_client):
            try:
                res = one_request(served.v1, (i + j) % 4, i * 1000 + j)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
                return
            with lock:
                results.append(res)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors
    assert len(results) == clients * per_client
    return results


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
