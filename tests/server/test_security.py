"""Safe by default, item by item, against a real server on loopback: Host and Origin checks,
no CORS unless asked, the Bearer key, the body cap, bad requests as 400s with OpenAI error
objects (never a traceback), context bounds, the refusal to listen beyond loopback without a key,
the log line per request without prompt text, and a client leaving mid-stream stopping its
generation."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from tests.server.conftest import start_server, wait_idle

CHAT = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 2, "temperature": 0}


def is_error_object(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    assert "Traceback" not in r.text and r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and "\n" not in err["message"]
    return err


# -- Host header (DNS rebinding) and Origin ------------------------------------------------------


def test_dns_rebinding_a_foreign_host_header_is_403(served):
    for host in ("evil.example", "evil.example:%d" % served.port, "127.0.0.1.evil.example", "", "192.168.1.10"):
        r = httpx.get(served.v1 + "/models", headers={"Host": host})
        err = is_error_object(r, 403)
        assert "localhost" in err["message"]
    r = httpx.post(served.v1 + "/chat/completions", json=CHAT, headers={"Host": "evil.example"})
    is_error_object(r, 403)


def test_loopback_host_names_are_served(served):
    for host in ("localhost", f"localhost:{served.port}", f"127.0.0.1:{served.port}", "[::1]:1"):
        assert httpx.get(served.v1 + "/models", headers={"Host": host}).status_code == 200


def test_a_cross_site_page_cannot_post(served):
    r = httpx.post(served.v1 + "/chat/completions", json=CHAT, headers={"Origin": "https://evil.example"})
    is_error_object(r, 403)
    assert served.owner.queue_length == 0


def test_no_cors_headers_unless_an_origin_is_given(served, served_keyed):
    r = httpx.get(served.v1 + "/models", headers={"Origin": "http://localhost:3000"})
    assert r.status_code == 200
    assert not any(k.lower().startswith("access-control-") for k in r.headers)
    pre = httpx.options(
        served.v1 + "/chat/completions",
        headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"},
    )
    assert not any(k.lower().startswith("access-control-") for k in pre.headers)
    # with --cors-origin: that origin (and only it) gets the headers, preflight included
    pre = httpx.options(
        served_keyed.v1 + "/chat/completions",
        headers={
            "Origin": "http://localhost:3000",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert pre.status_code == 200
    assert pre.headers["access-control-allow-origin"] == "http://localhost:3000"
    r = httpx.get(
        served_keyed.v1 + "/models",
        headers={"Origin": "http://localhost:3000", "Authorization": "Bearer s3cret-key-123"},
    )
    assert r.headers["access-control-allow-origin"] == "http://localhost:3000"
    r = httpx.get(
        served_keyed.v1 + "/models",
        headers={"Origin": "http://localhost:4000", "Authorization": "Bearer s3cret-key-123"},
    )
    assert "access-control-allow-origin" not in r.headers


# -- the key ---------------------------------------------------------------------------------------


def test_bearer_key(served_keyed):
    url = served_keyed.v1 + "/models"
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Bearer s3cret-key-12"},
        {"Authorization": "Basic s3cret-key-123"},
        {"Authorization": "s3cret-key-123"},
    ):
        err = is_error_object(httpx.get(url, headers=headers), 401)
        assert err["code"] == "invalid_api_key"
    assert httpx.get(url, headers={"Authorization": "Bearer s3cret-key-123"}).status_code == 200
    assert httpx.get(served_keyed.url + "/health").status_code == 200  # health stays open


def test_the_key_is_compared_in_constant_time(served_keyed, monkeypatch):
    import hmac

    from app.server import app as server_app

    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(server_app.hmac, "compare_digest", spy)
    httpx.get(served_keyed.v1 + "/models", headers={"Authorization": "Bearer x"})
    httpx.get(served_keyed.v1 + "/models", headers={"Authorization": "Bearer " + "y" * 500})
    assert calls == [(32, 32), (32, 32)]  # digests of equal length: no length leak either


def test_listening_beyond_loopback_needs_a_key(smollm2_path, capsys):
    from app.cli import main
    from app.server.cli import check_exposure

    assert main(["serve", str(smollm2_path), "--host", "0.0.0.0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--api-key" in err and "Traceback" not in err
    assert check_exposure("127.0.0.1", None, None) is None
    assert check_exposure("localhost", None, None) is None
    assert check_exposure("::1", None, None) is None
    assert "--api-key" in check_exposure("192.168.1.5", None, None)
    assert "--api-key" in check_exposure("::", None, None)
    assert check_exposure("0.0.0.0", "long-enough-key", None) is None
    assert "at least 8" in check_exposure("0.0.0.0", "short", None)
    assert "not '*'" in check_exposure("127.0.0.1", None, "*")


# -- bad requests ------------------------------------------------------------------------------------


def test_the_body_is_capped_at_one_megabyte(served):
    big = json.dumps({"messages": [{"role": "user", "content": "x" * (1 << 20)}]})
    err = is_error_object(
        httpx.post(served.v1 + "/chat/completions", content=big, headers={"Content-Type": "application/json"}), 413
    )
    assert "1048576 bytes" in err["message"]

    def chunked():  # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b"x" * 65536

    is_error_object(httpx.post(served.v1 + "/completions", content=chunked()), 413)


@pytest.mark.parametrize(
    "body",
    [
        b"{bad json",
        b"",
        b"[]",
        b'"text"',
        b"null",
        b"[" * 200_000 + b"]" * 200_000,
        b'{"messages": []}',
        b'{"messages": [{"role": "root", "content": "x"}]}',
        b'{"messages": [{"role": "user", "content": {"a": 1}}]}',
        b'{"messages": [{"role": "user", "content": "x"}], "temperature": "warm"}',
        b'{"messages": [{"role": "user", "content": "x"}], "n": 3}',
        b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": "10"}',
        b"\xff\xfe\x00garbage",
    ],
)
def test_malformed_requests_are_400_never_a_traceback(served, body):
    r = httpx.post(served.v1 + "/chat/completions", content=body, headers={"Content-Type": "application/json"})
    is_error_object(r, 400)


def test_unknown_paths_and_methods_are_error_objects(served):
    is_error_object(httpx.get(served.v1 + "/engines"), 404)
    is_error_object(httpx.get(served.v1 + "/chat/completions"), 405)


def test_messages_and_max_tokens_are_bounded_by_the_context(served):
    from tests.server.conftest import N_CTX

    url = served.v1 + "/chat/completions"
    err = is_error_object(httpx.post(url, json=dict(CHAT, max_tokens=N_CTX)), 400)
    assert err["code"] == "context_length_exceeded" and err["param"] == "max_tokens"
    long = {"messages": [{"role": "user", "content": "word " * (2 * N_CTX)}]}
    err = is_error_object(httpx.post(url, json=long), 400)
    assert err["code"] == "context_length_exceeded" and str(N_CTX) in err["message"]
    err = is_error_object(httpx.post(served.v1 + "/completions", json={"prompt": [1, 10**9], "max_tokens": 1}), 400)
    assert "token ids" in err["message"]


# -- logging ------------------------------------------------------------------------------------------


def test_one_log_line_per_request_and_never_the_prompt(served, served_engine, caplog):
    secret = "zebra-violet-42"
    body = {"messages": [{"role": "user", "content": f"Repeat {secret}"}], "max_tokens": 2, "temperature": 0}
    with caplog.at_level(logging.INFO):
        r = httpx.post(served.v1 + "/chat/completions", json=body)
        assert r.status_code == 200
        httpx.post(served.v1 + "/chat/completions", json={"messages": []})
    lines = [rec.getMessage() for rec in caplog.records if rec.name == "app.server.app"]
    assert len(lines) == 2, lines
    assert lines[0].startswith("POST /v1/chat/completions 200 ") and " tok " in lines[0]
    assert lines[0].endswith("s") and lines[1].startswith("POST /v1/chat/completions 400 ")
    assert not any(secret in rec.getMessage() for rec in caplog.records)
    # --log-prompts: then (and only then) the text is logged
    eng, owner = served_engine
    loud = start_server(owner, eng, log_prompts=True)
    try:
        caplog.clear()
        with caplog.at_level(logging.INFO):
            httpx.post(loud.v1 + "/chat/completions", json=body)
        assert any(secret in rec.getMessage() for rec in caplog.records)
    finally:
        loud.stop()


# -- a client that leaves ------------------------------------------------------------------------------


def test_a_client_leaving_mid_stream_cancels_its_generation(served):
    body = {
        "prompt": "The history of the world, in many chapters. Chapter 1:",
        "max_tokens": 600,
        "temperature": 0,
        "stream": True,
        "ignore_eos": True,
    }
    wait_idle(served.owner)
    n_before = served.owner.jobs_done  # (finished keeps only the last 64)
    received = 0
    with httpx.stream("POST", served.v1 + "/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: {"):
                received += 1
                if received == 3:
                    break  # leaving: the connection closes here
    wait_idle(served.owner)
    fin = served.owner.finished[-1]
    assert served.owner.jobs_done == n_before + 1
    assert fin.stop_reason == "cancelled"
    assert len(fin.ids) < 600 // 2, f"{len(fin.ids)} tokens made after the client left"
    # and the server goes on serving
    assert httpx.post(served.v1 + "/chat/completions", json=CHAT).status_code == 200


def test_a_client_leaving_while_queued_or_waiting_cancels_too(served):
    wait_idle(served.owner)
    # sampled (a greedy reply with ignore_eos repeats itself, and prompt lookup then guesses it so
    # well that 600 tokens came back within a second on a fast CPU), and a short client timeout
    body = dict(CHAT, max_tokens=600, ignore_eos=True, temperature=1.0, seed=7)
    with pytest.raises(httpx.TimeoutException):
        httpx.post(served.v1 + "/chat/completions", json=body, timeout=0.3)
    wait_idle(served.owner)
    fin = served.owner.finished[-1]
    assert fin.stop_reason == "cancelled" and len(fin.ids) < 600
