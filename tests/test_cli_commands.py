"""Every subcommand is reachable from `llambda` and follows the one-line-error rule."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import app.kernels
from app.cli import main
from app.gguf import open_gguf
from app.text import load_tokenizer


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], input=stdin, capture_output=True, text=True, timeout=300
    )


def test_tokenize_text_and_json_lines(smollm2_path):
    with open_gguf(smollm2_path) as f:
        tok = load_tokenizer(f)
    text = "Hello <|im_end|> wörld 🎉"
    r = run("tokenize", "--json", str(smollm2_path), text)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == tok.encode(text)
    r = run("tokenize", str(smollm2_path), stdin='"a b"\n"<|im_end|>"\n')
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in r.stdout.splitlines()] == [tok.encode("a b"), tok.encode("<|im_end|>")]
    r = run("tokenize", "--special", "--json", str(smollm2_path), "<|im_end|>")
    assert json.loads(r.stdout) == [tok.eos_id]


def test_tokenize_bad_stdin_is_a_usage_error(smollm2_path):
    r = run("tokenize", str(smollm2_path), stdin="not json\n")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "line 1" in r.stderr


def test_unknown_model_name_exit_3():
    r = run("generate", "no-such-model", "--prompt", "hi")
    assert r.returncode == 3 and "no model named 'no-such-model'" in r.stderr
    assert "Traceback" not in r.stderr


def test_generate_json_greedy(smollm2_path):
    r = run(
        "generate",
        str(smollm2_path),
        "--prompt",
        "The capital of France is",
        "--raw",
        "--temperature",
        "0",
        "--max-tokens",
        "8",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["ids"]) == 8 and out["stop_reason"] == "length"
    assert "Paris" in out["text"]
    assert {"prompt_tokens", "generated_tokens"} <= set(out["stats"])


def test_bench_kernels_wiring(monkeypatch, capsys):
    small = functools.partial(app.kernels.bench_kernels, n_bytes=1 << 20, reps=1, types=[2])
    monkeypatch.setattr(app.kernels, "bench_kernels", small)
    assert main(["bench", "--kernels", "--threads", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["type"] == "Q4_0" and rows[0]["threads"] == 1 and rows[0]["bytes_per_s"] > 0


def test_bench_without_model_is_a_usage_error(capsys):
    assert main(["bench"]) == 2
