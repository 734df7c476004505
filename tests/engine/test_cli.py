"""The engine's command functions (registered by app/cli.py as generate / chat / bench)."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from app.engine import cli
from tests.reference.forward import ReferenceModel
from tests.synth import TinySpec, write_tiny_model


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("c") / "tiny.gguf", TinySpec(), seed=5)


def parse(add, argv):
    p = argparse.ArgumentParser()
    add(p)
    return p.parse_args(argv)


def test_generate_json_raw_greedy(tiny_path, capsys):
    args = parse(
        cli.add_generate_args,
        [
            str(tiny_path),
            "--prompt",
            "the cat",
            "--raw",
            "--temperature",
            "0",
            "--max-tokens",
            "6",
            "--json",
            "--threads",
            "1",
            "--ctx",
            "64",
            "--kv-type",
            "f32",
        ],
    )
    assert cli.run_generate(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"prompt_ids", "ids", "text", "stop_reason", "stats"}
    assert out["stop_reason"] in ("length", "eog")
    ref = ReferenceModel(tiny_path).forward(out["prompt_ids"] + out["ids"][:-1])
    assert out["ids"] == [int(t) for t in ref[len(out["prompt_ids"]) - 1 :].argmax(-1)]
    for k in (
        "prompt_tokens",
        "generated_tokens",
        "prompt_tok_s",
        "generation_tok_s",
        "ttft_s",
        "peak_rss_bytes",
        "threads",
    ):
        assert k in out["stats"]


def test_generate_chat_template_and_usage_errors(tiny_path, capsys):
    args = parse(
        cli.add_generate_args,
        [
            str(tiny_path),
            "--prompt",
            "hi",
            "--system",
            "be brief",
            "--max-tokens",
            "3",
            "--json",
            "--seed",
            "1",
            "--ctx",
            "64",
        ],
    )
    assert cli.run_generate(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["prompt_ids"]) > 10  # the ChatML wrapping of both turns
    bad = parse(cli.add_generate_args, [str(tiny_path), "--prompt", "x", "--raw", "--system", "s"])
    assert cli.run_generate(bad) == 2
    bad = parse(cli.add_generate_args, [str(tiny_path), "--prompt", "x", "--temperature", "-1"])
    assert cli.run_generate(bad) == 2


def test_bench_json(tiny_path, capsys):
    args = parse(
        cli.add_bench_args, [str(tiny_path), "--threads", "1", "--pp", "16", "--tg", "4", "--reps", "2", "--json"]
    )
    assert cli.run_bench(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["threads"], r["test"]) for r in rows] == [(1, "pp16"), (1, "tg4")]
    assert all(r["tok_s"] > 0 for r in rows)
    assert all(r["waited"] == 0.0 and r["stalls_per_s"] == 0.0 for r in rows)  # one thread waits on no one


def test_bench_depth_runs_every_test_after_that_many_cached_tokens(tiny_path, capsys, monkeypatch):
    """--depth N (llama-bench's -d): the prefix is decoded once, from position 0, then pp and tg
    run at positions N.. (what generation deep in a conversation costs)."""
    from app.engine.decoder import CDecoder

    calls = []
    real = CDecoder.decode

    def spy(self, tokens, start_pos, all_logits=False):
        calls.append((len(tokens), start_pos))
        return real(self, tokens, start_pos, all_logits)

    monkeypatch.setattr(CDecoder, "decode", spy)
    args = parse(
        cli.add_bench_args,
        [str(tiny_path), "--threads", "1", "--pp", "16", "--tg", "4", "--reps", "1", "--depth", "40"],
    )
    assert cli.run_bench(args) == 0
    assert "pp16 @ d40" in capsys.readouterr().out
    assert calls[0] == (40, 0)
    assert calls[1:] == [(16, 40)] * 2 + [(1, 40), (1, 41), (1, 42), (1, 43)] * 2
    with pytest.raises(SystemExit):
        parse(cli.add_bench_args, [str(tiny_path), "--depth", "-1"])


def test_chat_reads_turns_until_exit(tiny_path, capsys):
    args = parse(cli.add_chat_args, [str(tiny_path), "--max-tokens", "4", "--temperature", "0", "--ctx", "128"])
    stdin = io.StringIO("hello\n\n/reset\nagain\n/exit\nnever read\n")
    stdout = io.StringIO()
    assert cli.run_chat(args, stdin=stdin, stdout=stdout) == 0
    err = capsys.readouterr().err
    assert err.count("tok/s") == 2 and "forgotten" in err


def test_generate_resident_memory_within_file_plus_kv_plus_80mb(smollm2_path):
    """Peak RSS of a whole `generate` process (interpreter, numpy, tokenizer included). Where the
    level packs the weights (avx2), the packed copy replaces the file's pages a 4 MiB slice of rows
    at a time, so at the peak one slice is held twice."""
    import os
    import subprocess
    import sys

    n_ctx = 2048
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.engine.cli",
            "generate",
            str(smollm2_path),
            "--prompt",
            "Name a colour.",
            "--max-tokens",
            "16",
            "--temperature",
            "0",
            "--ctx",
            str(n_ctx),
            "--threads",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    stats = json.loads(out.stdout)["stats"]
    kv = 2 * 30 * n_ctx * 3 * 64 * 2
    slice_ = 4 * 2**20
    limit = os.path.getsize(smollm2_path) + slice_ + kv + 80 * 2**20
    assert 0 < stats["peak_rss_bytes"] <= limit, (stats["peak_rss_bytes"] / 2**20, limit / 2**20)


@pytest.mark.skipif(
    not hasattr(__import__("signal"), "SIGINT") or __import__("os").name == "nt", reason="POSIX signals"
)
def test_chat_ctrl_c_stops_the_reply_not_the_chat(smollm2_path):
    """A long reply (a story, 300 tokens allowed) stops at Ctrl+C; the next turn is answered;
    /exit leaves with status 0."""
    import signal
    import subprocess
    import sys
    import time

    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.engine.cli",
            "chat",
            str(smollm2_path),
            "--max-tokens",
            "300",
            "--ctx",
            "512",
            "--threads",
            "2",
            "--temperature",
            "0",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    import threading

    chunks: list[str] = []
    started = threading.Event()

    def read_stdout():
        while True:
            c = p.stdout.read(1)
            if not c:
                break
            chunks.append(c)
            if len(chunks) > 20:
                started.set()  # the reply is streaming: the handler is installed

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    try:
        p.stdin.write("Write a long story about a dragon.\n")
        p.stdin.flush()
        assert started.wait(90), "no reply streamed"
        p.send_signal(signal.SIGINT)
        time.sleep(0.3)
        p.stdin.write("What is 2+2?\n/exit\n")
        p.stdin.flush()
        p.stdin.close()
        err = p.stderr.read()
        p.wait(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "(stopped)" in err and err.count("tok/s") == 2
