"""`llambda perplexity` and the base-file format (app/engine/perplexity.py), on a tiny seeded model
whose numpy reference forward pass (tests/reference/forward.py) is the oracle of every figure,
plus the bad inputs: empty, too short or binary text, a base from another model or text, a
truncated or damaged base -- each one line on stderr, exit 2 (usage) or 3 (bad file), and no
file written half-way.
"""

from __future__ import annotations

import argparse
import json
import math
import os

import numpy as np
import pytest

from app.engine import cli
from app.engine import perplexity as P
from tests.reference.forward import ReferenceModel
from tests.synth import TinySpec, write_tiny_model

CTX = 64
WORDS = (
    "the clock on the market hall stopped at a quarter past four, and a pigeon "
    "had built its nest against the escapement; def tick(n): return n + 1\n"
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("ppl")
    text = d / "text.txt"
    text.write_text(WORDS * 4, encoding="utf-8")
    return {
        "model": write_tiny_model(d / "tiny.gguf", TinySpec(), seed=5),
        "other": write_tiny_model(d / "other.gguf", TinySpec(n_layer=1), seed=9),
        "text": text,
        "dir": d,
    }


def run(argv, capsys):
    p = argparse.ArgumentParser()
    cli.add_perplexity_args(p)
    code = cli.run_perplexity(p.parse_args([str(a) for a in argv]))
    out = capsys.readouterr()
    return code, out.out, out.err


def _reference_scores(model_path, text_path):
    """Per scored position (log p of the next token, full log-probs) by the numpy reference."""
    from app.gguf import open_gguf
    from app.text import load_tokenizer

    with open_gguf(model_path) as f:
        tok = load_tokenizer(f)
        ids = tok.encode(text_path.read_text(), add_special=True, parse_special=False)
        bos = tok.bos_id if tok.add_bos else None
    plan = P.make_plan(ids, CTX, bos)
    ref = ReferenceModel(model_path, n_ctx=CTX)
    tlp, lps = [], []
    for chunk in plan.chunks:
        lp = P.log_softmax_rows(ref.forward(list(chunk))[plan.first : CTX - 1])
        tlp.extend(lp[np.arange(lp.shape[0]), list(chunk[plan.first + 1 :])])
        lps.append(lp)
    return plan, np.array(tlp), np.concatenate(lps)


def test_perplexity_matches_the_reference_forward_pass(tiny, capsys):
    code, out, err = run([tiny["model"], tiny["text"], "--ctx", CTX, "--json", "--threads", 1], capsys)
    assert code == 0, err
    got = json.loads(out)
    plan, tlp, _ = _reference_scores(tiny["model"], tiny["text"])
    assert got["n_chunks"] == len(plan.chunks) >= 2 and got["n_positions"] == tlp.size
    want = math.exp(-tlp.mean())
    assert got["ppl"] == pytest.approx(want, rel=1e-4)
    nll = -tlp
    assert got["ppl_se"] == pytest.approx(want * nll.std(ddof=1) / math.sqrt(nll.size), rel=1e-3)


def test_save_then_compare_itself_and_another_model(tiny, capsys):
    base = tiny["dir"] / "base.bin"
    code, out, err = run([tiny["model"], tiny["text"], "--ctx", CTX, "--save-logits", base], capsys)
    assert code == 0, err
    assert "perplexity:" in out and base.exists()
    assert "chunk 1/" in err  # progress, plain lines when not a terminal
    b = P.read_base(str(base))
    assert b.header["n_ctx"] == CTX and b.k == P.TOP_K and b.header["model"]["file"] == "tiny.gguf"
    # the same model against its own base: KLD ~0 (float32 storage), full agreement
    code, out, err = run([tiny["model"], tiny["text"], "--kl-divergence", base, "--json"], capsys)
    assert code == 0, err
    same = json.loads(out)
    assert same["kld_mean"] < 1e-6 and same["top1"] == 1.0
    assert same["ppl_ratio"] == pytest.approx(1.0, abs=1e-6)
    # another model with the same vocabulary: the figures are the reference's, KLD a lower bound
    code, out, err = run([tiny["other"], tiny["text"], "--kl-divergence", base, "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    plan, tlp_other, lp_other = _reference_scores(tiny["other"], tiny["text"])
    _, tlp_base, lp_base = _reference_scores(tiny["model"], tiny["text"])
    full = (np.exp(lp_base) * (lp_base - lp_other)).sum(-1)
    assert 0 < got["kld_mean"] <= full.mean() * (1 + 1e-4)
    assert got["kld_mean"] == pytest.approx(full.mean(), rel=0.5)
    agree = (lp_base.argmax(-1) == lp_other.argmax(-1)).mean()
    assert got["top1"] == pytest.approx(agree, abs=1e-9)
    assert got["ppl_ratio"] == pytest.approx(math.exp(tlp_base.mean() - tlp_other.mean()), rel=1e-4)
    assert got["base_ppl"] == pytest.approx(math.exp(-tlp_base.mean()), rel=1e-4)
    code, out, _ = run([tiny["other"], tiny["text"], "--kl-divergence", base], capsys)
    assert "KLD: mean" in out and "top-1 agreement:" in out and "perplexity ratio:" in out


def test_kld_estimator_is_a_lower_bound_and_exact_on_the_top_k():
    rng = np.random.default_rng(0)
    logits_p = rng.normal(0, 3, (8, 500)).astype(np.float32)
    logits_q = logits_p + rng.normal(0, 0.3, (8, 500)).astype(np.float32)
    targets = rng.integers(0, 500, 8)
    tlp, am, tid, tlogp, rest, _ = P._score_rows(logits_p, targets, 32, None, None)
    base = P.BaseFile({"k": 32}, tlp.astype(np.float32), tid, tlogp, rest)
    p, q = P.log_softmax_rows(logits_p), P.log_softmax_rows(logits_q)
    full = (np.exp(p) * (p - q)).sum(-1)
    est = P._kld_rows(base, slice(0, 8), q)
    assert np.all(est <= full + 1e-6) and np.all(est > 0.5 * full)
    # with k = the whole vocabulary the estimate is the divergence itself
    tlp, am, tid, tlogp, rest, _ = P._score_rows(logits_p, targets, 500, None, None)
    whole = P.BaseFile({"k": 500}, tlp.astype(np.float32), tid, tlogp, rest)
    assert np.allclose(P._kld_rows(whole, slice(0, 8), q), full, rtol=1e-4, atol=1e-7)
    # the k log-probabilities and the rest's mass add up to one
    tlp, am, tid, tlogp, rest, _ = P._score_rows(logits_p, targets, 32, None, None)
    assert np.allclose(np.exp(rest) + np.exp(tlogp.astype(np.float64)).sum(-1), 1.0, atol=1e-6)
    assert np.array_equal(am, p.argmax(-1)) and np.array_equal(tid[:, 0], am)


def test_plan_chunks_bos_and_hashes():
    ids = list(range(10, 110))
    plan = P.make_plan(ids, 32, bos_id=1)
    assert len(plan.chunks) == 3 and all(c[0] == 1 for c in plan.chunks)
    assert plan.chunks[1][1:] == tuple(range(43, 74)) and plan.first == 16 and plan.n_scored == 15
    assert P.make_plan(ids, 32, None, n_chunks=2).chunks[1][0] == 42
    assert plan.chunk_sha256 != P.make_plan(ids, 32, bos_id=2).chunk_sha256
    with pytest.raises(P.TextError, match="fewer than one chunk"):
        P.make_plan(ids[:31], 32, 1)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty"),
        (b"   \n\t\n", "empty"),
        (b"short text", "fewer than one chunk"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00" * 50, "binary"),
        (b"caf\xe9 " * 100, "not UTF-8"),
    ],
)
def test_bad_text_is_one_line_exit_2_nothing_written(tiny, capsys, content, message):
    bad = tiny["dir"] / "bad.txt"
    bad.write_bytes(content)
    out_base = tiny["dir"] / "never.bin"
    code, out, err = run([tiny["model"], bad, "--ctx", CTX, "--save-logits", out_base], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out_base.exists() and not list(tiny["dir"].glob("*.part"))


def test_base_from_another_text_or_model_is_refused(tiny, capsys, tmp_path):
    base = tmp_path / "base.bin"
    assert run([tiny["model"], tiny["text"], "--ctx", CTX, "--save-logits", base], capsys)[0] == 0
    other_text = tmp_path / "other.txt"
    other_text.write_text(WORDS.upper() * 4)
    code, _, err = run([tiny["model"], other_text, "--kl-divergence", base], capsys)
    assert code == 2 and "other token ids" in err and len(err.strip().splitlines()) == 1
    code, _, err = run([tiny["model"], tiny["text"], "--ctx", 32, "--kl-divergence", base], capsys)
    assert code == 2 and "--ctx 64" in err
    # a model with another vocabulary (the SentencePiece tiny model)
    from tests.synth import write_tiny_spm_model

    spm = write_tiny_spm_model(tmp_path / "spm.gguf")
    code, _, err = run([spm, tiny["text"], "--kl-divergence", base], capsys)
    assert code == 2 and ("another vocabulary" in err or "other token ids" in err), err
    assert len(err.strip().splitlines()) == 1


def test_truncated_or_damaged_base_is_exit_3(tiny, capsys, tmp_path):
    base = tmp_path / "base.bin"
    assert run([tiny["model"], tiny["text"], "--ctx", CTX, "--save-logits", base], capsys)[0] == 0
    raw = base.read_bytes()
    cases = {
        "truncated": raw[: len(raw) // 2],
        "header only": raw[:40],
        "empty": b"",
        "damaged": raw[:100] + bytes([raw[100] ^ 1]) + raw[101:],
        "not a base": b"GGUF" + bytes(200),
        "version 9": raw[:8] + (9).to_bytes(4, "little") + raw[12:],
    }
    for what, data in cases.items():
        bad = tmp_path / "bad.bin"
        bad.write_bytes(data)
        code, out, err = run([tiny["model"], tiny["text"], "--kl-divergence", bad], capsys)
        assert code == 3 and len(err.strip().splitlines()) == 1 and out == "", (what, err)
        assert "base file" in err, (what, err)
    code, _, err = run([tiny["model"], tiny["text"], "--kl-divergence", tmp_path / "missing.bin"], capsys)
    assert code == 3 and "cannot read" in err


def test_save_is_atomic(tiny, tmp_path, monkeypatch, capsys):
    """A failure while writing leaves neither a half file nor a temporary one; an existing base
    stays as it was."""
    base = tmp_path / "base.bin"
    base.write_bytes(b"old")
    real_fsync = os.fsync

    def boom(fd):
        real_fsync(fd)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(P.os, "fsync", boom)
    code, _, err = run([tiny["model"], tiny["text"], "--ctx", CTX, "--save-logits", base], capsys)
    monkeypatch.undo()
    assert code != 0 and "No space left" in err
    assert base.read_bytes() == b"old" and os.listdir(tmp_path) == ["base.bin"]
    code, _, err = run(
        [tiny["model"], tiny["text"], "--ctx", CTX, "--save-logits", tmp_path / "no" / "such" / "dir.bin"], capsys
    )
    assert code == 2 and "not writable" in err


def test_progress_bar_on_a_terminal():
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True

    s = Tty()
    bar = cli._Progress(4, s)
    bar.update(1, 512, 1.0, 12.5)
    bar.update(4, 2048, 4.0, 12.0)
    text = s.getvalue()
    assert text.count("\r") == 2 and "[#######" in text and "chunk 4/4" in text and text.endswith("\n")
    piped = io.StringIO()
    cli._Progress(2, piped).update(1, 512, 2.0, 9.0)
    assert piped.getvalue() == "chunk 1/2: ppl 9.0000, 256.0 tok/s\n"


def test_registered_in_the_main_command_line(tiny, capsys):
    from app import cli as main_cli

    assert "perplexity" in main_cli.SUBCOMMANDS
    code = main_cli.main(
        ["perplexity", str(tiny["model"]), str(tiny["text"]), "--ctx", str(CTX), "--chunks", "1", "--json"]
    )
    assert code == 0 and json.loads(capsys.readouterr().out)["n_chunks"] == 1
    with pytest.raises(SystemExit):
        main_cli.main(["perplexity", "--help"])
    assert "KL divergence" in " ".join(capsys.readouterr().out.split())
