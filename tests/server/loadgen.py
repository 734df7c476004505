"""Load on a server's /v1 URL: `clients` threads, each sending `per_client` requests in turn of
four kinds (a streamed chat read to the end, a plain completion, a stream left after its first
piece, garbage). Used in-process by test_load and, as a separate program (so that its threads
do not share the window's interpreter), by test_window_load:

    python -m tests.server.loadgen URL CLIENTS PER_CLIENT   # prints the results as JSON
"""

from __future__ import annotations

import json
import sys
import threading

import httpx

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


def run_load(url: str, clients: int, per_client: int) -> list[tuple[str, bool]]:
    """Every client's results; raises the first client error (a refused or broken connection)."""
    results: list[tuple[str, bool]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        for j in range(per_client):
            try:
                res = one_request(url, (i + j) % 4, i * 1000 + j)
            except BaseException as e:  # reported below
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


def main(argv: list[str]) -> int:
    url, clients, per_client = argv[0], int(argv[1]), int(argv[2])
    try:
        results = run_load(url, clients, per_client)
    except AssertionError as e:
        print(json.dumps({"error": str(e)}))
        return 1
    print(json.dumps({"results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
