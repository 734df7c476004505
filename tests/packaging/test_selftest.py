"""`app.selftest.run()` and its tiny model: the oracle in the file, isolation, and that it fails
when the numbers are wrong (a self-test that cannot fail proves nothing)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app import selftest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "resources" / "selftest" / "tiny.gguf"
SPM_VOCAB = ROOT / "resources" / "selftest" / "tiny-spm.gguf"


def _make_script():
    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        import make_selftest_model
    finally:
        sys.path.remove(str(ROOT / "packaging"))
    return make_selftest_model


def test_models_are_small_and_where_the_self_test_looks():
    assert selftest.model_path() == MODEL
    assert MODEL.stat().st_size + SPM_VOCAB.stat().st_size < 2 * 1024 * 1024


def test_script_makes_the_committed_files_byte_for_byte(tmp_path):
    script = _make_script()
    out = tmp_path / "tiny.gguf"
    assert script.main([str(out)]) == 0
    assert out.read_bytes() == MODEL.read_bytes()
    assert (tmp_path / "tiny-spm.gguf").read_bytes() == SPM_VOCAB.read_bytes()


def test_script_refuses_a_model_whose_answer_is_not_decisive(tmp_path, monkeypatch):
    script = _make_script()
    monkeypatch.setattr(script, "MIN_MARGIN", 1e9)
    with pytest.raises(SystemExit, match="margin"):
        script.make(tmp_path / "tiny.gguf")


def test_oracle_in_the_file_is_the_greeting():
    from app.gguf import open_gguf
    from app.text import load_tokenizer

    with open_gguf(MODEL) as f:
        oracle = selftest._oracle(f.metadata)
        tok = load_tokenizer(f)
        assert oracle["answer"] == "Hello from Llambda!"
        assert tok.decode(oracle["answer_tokens"]) == "Hello from Llambda!"
        assert tok.is_eog(oracle["answer_tokens"][-1])
        assert oracle["logits"].shape == (tok.n_vocab,)
        assert int(np.argmax(oracle["logits"])) == oracle["answer_tokens"][0]


def test_run_passes_with_one_line(capsys):
    before = dict(os.environ)
    assert selftest.run() == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and out.startswith("llambda self-test: ok: tiny.gguf llama")
    assert "'Hello from Llambda!'" in out and "sentencepiece 10 tokens" in out and "window" in out
    assert "asked 'ping', answered 'Hello from Llambda!', closed" in out
    assert err == ""
    assert dict(os.environ) == before


def test_isolation_moves_every_folder_and_refuses_the_network(monkeypatch):
    from app import paths

    monkeypatch.setenv("LLAMBDA_DATA_DIR", "/nonexistent/data")
    with selftest.isolated() as home:
        for d in (paths.cache_dir(), paths.models_dir(), paths.data_dir(), paths.log_dir()):
            assert home in d.parents
        assert os.environ["QT_QPA_PLATFORM"] == "offscreen"
        with pytest.raises(OSError, match="network"):
            socket.create_connection(("127.0.0.1", 9))
    assert not home.exists()
    assert os.environ["LLAMBDA_DATA_DIR"] == "/nonexistent/data"


def test_a_fresh_home_stays_empty(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMBDA_", "XDG_"))}
    env.update(HOME=str(home), QT_QPA_PLATFORM="xcb")  # the self-test must switch to offscreen
    r = subprocess.run(
        [sys.executable, "-m", "app.selftest"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("llambda self-test: ok")
    assert list(home.iterdir()) == []


def _damaged_copy(tmp_path: Path) -> Path:
    """The model with one Q8_0 scale of the output matrix changed: the logits must move."""
    from app.gguf import open_gguf

    with open_gguf(MODEL) as f:
        info = f.tensors["output.weight"]
        assert info.type.name == "Q8_0"
        offset, n_rows, stride = info.offset, info.n_rows, info.row_bytes
    data = bytearray(MODEL.read_bytes())
    # every row's first block scale (f16, little-endian) halved: exponent lowered by one
    for r in range(n_rows):
        pos = offset + r * stride + 1
        data[pos] = (data[pos] - 0x04) & 0xFF
    out = tmp_path / "tiny.gguf"
    out.write_bytes(bytes(data))
    return out


def test_run_fails_when_the_kernels_disagree_with_the_oracle(tmp_path, monkeypatch, capsys):
    bad = _damaged_copy(tmp_path)
    shutil.copyfile(SPM_VOCAB, tmp_path / "tiny-spm.gguf")
    monkeypatch.setattr(selftest, "model_path", lambda: bad)
    assert selftest.run() == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("llambda self-test: FAILED: engine: logits off the oracle")


def test_run_fails_when_sentencepiece_disagrees(tmp_path, monkeypatch, capsys):
    """The spm vocabulary with one expected id changed: the tokenizer check must catch it."""
    shutil.copyfile(MODEL, tmp_path / "tiny.gguf")
    data = bytearray(SPM_VOCAB.read_bytes())
    key = b"llambda.selftest.ids"
    at = data.index(key) + len(key) + 4 + 4 + 8 + 4 * 3  # value type, element type, count; 4th id
    data[at] ^= 1
    (tmp_path / "tiny-spm.gguf").write_bytes(bytes(data))
    monkeypatch.setattr(selftest, "model_path", lambda: tmp_path / "tiny.gguf")
    assert selftest.run() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("llambda self-test: FAILED: sentencepiece:")


def test_run_fails_when_the_window_cannot_load_the_model(monkeypatch, capsys):
    from app.errors import LlambdaError
    from app.ui import worker

    def broken_engine():
        raise LlambdaError("no engine today")

    monkeypatch.setattr(worker, "default_engine_factory", broken_engine)
    assert selftest.run() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("llambda self-test: FAILED: window: opening the model failed")
    assert "no engine today" in err


def test_run_fails_in_one_line_when_the_model_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(selftest, "model_path", lambda: tmp_path / "gone.gguf")
    assert selftest.run() == 1
    assert capsys.readouterr().err.startswith("llambda self-test: FAILED: ")


def test_run_fails_on_a_truncated_model(tmp_path, monkeypatch, capsys):
    cut = tmp_path / "tiny.gguf"
    shutil.copyfile(MODEL, cut)
    with open(cut, "r+b") as fh:
        fh.truncate(MODEL.stat().st_size // 2)
    monkeypatch.setattr(selftest, "model_path", lambda: cut)
    assert selftest.run() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "FAILED" in err and "Traceback" not in err
