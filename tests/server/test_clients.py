"""Real clients against a real server on SmolLM2: the official `openai` package (streaming and
not) gives the same text as `llambda generate` for the same seed and settings; the chat template
is the model's; a growing conversation decodes only its new tokens; the event loop answers while
the engine decodes; `llambda serve` itself runs as a process and stops on Ctrl+C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx
import openai
import pytest

from tests.server.conftest import N_CTX, wait_idle

PROMPT = "Name three colours of the rainbow."
SETTINGS = dict(temperature=0.7, seed=1234, max_tokens=24)


def client(served, **kw):
    return openai.OpenAI(base_url=served.v1, api_key=kw.pop("api_key", "unused"), max_retries=0, timeout=60, **kw)


def llambda(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, timeout=300)


def generate_json(*args) -> dict:
    """`llambda generate ... --json` run in this process (the command's own code, its output)."""
    import contextlib
    import io

    from app.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["generate", *args, "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def generated(smollm2_path):
    """`llambda generate` (chat template, and --raw) with the same seed and settings."""
    common = [
        "--seed",
        str(SETTINGS["seed"]),
        "--temperature",
        str(SETTINGS["temperature"]),
        "--max-tokens",
        str(SETTINGS["max_tokens"]),
        "--ctx",
        str(N_CTX),
    ]
    return (
        generate_json(str(smollm2_path), "--prompt", PROMPT, *common),
        generate_json(str(smollm2_path), "--prompt", "The capital of France is", "--raw", *common),
    )


def test_openai_chat_gives_the_text_of_llambda_generate(served, generated):
    want = generated[0]
    r = client(served).chat.completions.create(
        model="anything", messages=[{"role": "user", "content": PROMPT}], **SETTINGS
    )
    assert r.choices[0].message.content == want["text"] and want["text"]
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == ("length" if want["stop_reason"] == "length" else "stop")
    assert r.usage.prompt_tokens == len(want["prompt_ids"])
    assert r.usage.completion_tokens == len(want["ids"])
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert r.model == "SmolLM2-135M-Instruct.Q4_1"
    assert r.model_extra["timings"]["generation_tok_s"] >= 0


def test_openai_chat_streaming_gives_the_same_text(served, generated):
    want = generated[0]
    stream = client(served).chat.completions.create(
        model="x",
        messages=[{"role": "user", "content": PROMPT}],
        stream=True,
        stream_options={"include_usage": True},
        **SETTINGS,
    )
    pieces, reasons, usage, roles = [], [], None, []
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            roles += [c.delta.role] if c.delta.role else []
            pieces.append(c.delta.content or "")
            reasons += [c.finish_reason] if c.finish_reason else []
    assert "".join(pieces) == want["text"]
    assert roles == ["assistant"] and len(reasons) == 1
    assert usage.completion_tokens == len(want["ids"])


def test_the_stream_is_server_sent_events_ending_in_done(served):
    body = {"messages": [{"role": "user", "content": PROMPT}], "stream": True, "max_tokens": 4}
    with httpx.stream("POST", served.v1 + "/chat/completions", json=body, timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [ln for ln in r.iter_lines() if ln]
    assert lines[-1] == "data: [DONE]"
    assert all(ln.startswith("data: ") for ln in lines)
    last = json.loads(lines[-2][6:])
    assert last["choices"][0]["finish_reason"] in ("stop", "length") and "timings" in last


def test_openai_completions_give_the_text_of_generate_raw(served, generated):
    want = generated[1]
    c = client(served)
    r = c.completions.create(model="x", prompt="The capital of France is", **SETTINGS)
    assert r.choices[0].text == want["text"]
    assert r.usage.prompt_tokens == len(want["prompt_ids"])
    streamed = "".join(
        ch.choices[0].text
        for ch in c.completions.create(model="x", prompt="The capital of France is", stream=True, **SETTINGS)
        if ch.choices
    )
    assert streamed == want["text"]


def test_openai_models_and_errors(served):
    c = client(served)
    assert [m.id for m in c.models.list()] == ["SmolLM2-135M-Instruct.Q4_1"]
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], n=2)
    assert "'n' must be 1" in str(e.value)


def test_openai_client_with_a_key(served_keyed):
    good = client(served_keyed, api_key="s3cret-key-123")
    assert good.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], max_tokens=2).choices
    with pytest.raises(openai.AuthenticationError):
        client(served_keyed, api_key="wrong-key").models.list()


def test_stop_strings_and_the_template_of_the_model(served, served_engine):
    eng, _ = served_engine
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": PROMPT}]
    r = httpx.post(
        served.v1 + "/chat/completions",
        timeout=60,
        json={"messages": msgs, "max_tokens": 24, "temperature": 0, "stop": [" ", "\n"]},
    ).json()
    assert r["choices"][0]["finish_reason"] == "stop" and " " not in r["choices"][0]["message"]["content"]
    wait_idle(served.owner)  # the engine is idle: reading its template here races nothing
    assert r["usage"]["prompt_tokens"] == len(eng.chat_prompt(msgs))


def test_a_growing_conversation_decodes_only_its_new_tokens(served):
    c = client(served)
    msgs = [{"role": "user", "content": "Tell me about cats in one sentence."}]
    first = c.chat.completions.create(model="x", messages=msgs, max_tokens=20, temperature=0)
    msgs += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "And dogs?"},
    ]
    second = c.chat.completions.create(model="x", messages=msgs, max_tokens=4, temperature=0)
    cached = second.usage.prompt_tokens_details.cached_tokens
    new = second.usage.prompt_tokens - cached
    assert cached >= first.usage.prompt_tokens, (cached, first.usage)
    assert second.model_extra["timings"]["prompt_tokens_evaluated"] == new
    # only the new turn (a dozen template tokens around "And dogs?") and what the template
    # writes differently from the generated reply's tokens are decoded again
    assert new <= 16 + 4, new


def test_the_event_loop_answers_while_the_engine_decodes(served):
    """/health reports the queue at the moment it answers: 1 means a generation was running."""
    wait_idle(served.owner)
    body = {"prompt": "Once upon a time", "max_tokens": 600, "temperature": 0, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", served.v1 + "/completions", json=body, timeout=120) as r:
        lines = r.iter_lines()
        while not next(lines).startswith("data: {"):  # the first piece: decoding has begun
            pass
        queues = [httpx.get(served.url + "/health", timeout=30).json()["queue"] for _ in range(5)]
        pieces = 0
        for ln in lines:  # the stream goes on after them
            pieces += ln.startswith("data: {")
            if pieces == 3:
                break
    assert queues == [1] * 5 and pieces == 3  # leaving cancels the rest
    wait_idle(served.owner)
    assert served.owner.finished[-1].stop_reason == "cancelled"


def test_llambda_serve_runs_as_a_process_and_stops_on_ctrl_c(smollm2_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "serve",
            str(smollm2_path),
            "--port",
            "0",
            "--ctx",
            "256",
            "--api-key",
            "process-key-1",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = p.stderr.readline()  # the first line says where it listens
        assert "http://127.0.0.1:" in line, line
        base = line.split("http://", 1)[1].split()[0]
        c = openai.OpenAI(base_url="http://" + base, api_key="process-key-1", max_retries=0, timeout=60)
        r = c.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
        assert r.usage.completion_tokens >= 1
        p.send_signal(signal.SIGINT)
        assert p.wait(30) == 0
        rest = p.stderr.read()
        assert "Traceback" not in rest and "stopped" in rest
        assert "POST /v1/chat/completions 200" in rest
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def test_a_taken_port_is_one_line(served, smollm2_path):
    r = llambda("serve", str(smollm2_path), "--port", str(served.port))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot listen" in r.stderr
