"""`llambda bench --threads auto`: tries 1..N threads, marks and remembers the fastest for
prompts (pp) and for generation (tg); the settings dialog offers the remembered one."""

from __future__ import annotations

import argparse
import json

import pytest

from app.engine import cli, threads
from tests.synth import TinySpec, write_tiny_model


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("t") / "tiny.gguf", TinySpec(), seed=3)


def parse(argv):
    p = argparse.ArgumentParser()
    cli.add_bench_args(p)
    return p.parse_args(argv)


def test_threads_argument_takes_auto_or_a_list():
    assert parse(["m", "--threads", "auto"]).threads == "auto"
    assert parse(["m", "--threads", "AUTO"]).threads == "auto"
    assert parse(["m", "--threads", "1,3"]).threads == [1, 3]
    assert parse(["m"]).threads == [1, 2]
    for bad in ("fast", "0", "1,x"):
        with pytest.raises(SystemExit):
            parse(["m", "--threads", bad])


def test_fastest_picks_most_tokens_per_second_and_fewer_threads_on_a_tie():
    rows = [
        {"threads": 1, "test": "pp8", "tok_s": 10.0},
        {"threads": 2, "test": "pp8", "tok_s": 15.0},
        {"threads": 1, "test": "tg2", "tok_s": 5.0},
        {"threads": 2, "test": "tg2", "tok_s": 5.0},
    ]
    best = threads.fastest(rows)
    assert best["pp"]["threads"] == 2 and best["tg"]["threads"] == 1


def test_auto_tries_one_to_n_marks_and_remembers_the_fastest(tiny_path, capsys, monkeypatch):
    from app import kernels

    monkeypatch.setattr(kernels, "cpu_count_allowed", lambda: 2)
    args = parse([str(tiny_path), "--threads", "auto", "--pp", "8", "--tg", "2", "--reps", "1", "--json"])
    assert cli.run_bench(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted({r["threads"] for r in rows}) == [1, 2]
    for kind in ("pp", "tg"):
        mine = [r for r in rows if r["test"].startswith(kind)]
        marked = [r for r in mine if r.get("fastest")]
        assert len(marked) == 1
        assert marked[0]["tok_s"] == max(r["tok_s"] for r in mine)
    saved = threads.load_measured()
    assert saved["tried"] == [1, 2]
    assert saved["pp_threads"] == next(r["threads"] for r in rows if r["test"] == "pp8" and r.get("fastest"))
    assert saved["tg_threads"] == next(r["threads"] for r in rows if r["test"] == "tg2" and r.get("fastest"))


def test_auto_says_which_is_fastest_in_the_table(tiny_path, capsys, monkeypatch):
    from app import kernels

    monkeypatch.setattr(kernels, "cpu_count_allowed", lambda: 2)
    args = parse([str(tiny_path), "--threads", "auto", "--pp", "8", "--tg", "2", "--reps", "1"])
    assert cli.run_bench(args) == 0
    out = capsys.readouterr().out
    assert out.count("<- fastest") == 2
    assert "fastest for prompts (pp8): " in out and "fastest for generation (tg2): " in out


def test_a_plain_list_marks_nothing_and_saves_nothing(tiny_path, capsys):
    args = parse([str(tiny_path), "--threads", "1", "--pp", "8", "--tg", "2", "--reps", "1", "--json"])
    assert cli.run_bench(args) == 0
    assert not any(r.get("fastest") for r in json.loads(capsys.readouterr().out))
    assert threads.load_measured() is None


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"tg_threads": 0}', '{"when": "x"}'])
def test_a_bad_measurement_file_reads_as_none(text):
    from app.paths import ensure_dir

    ensure_dir(threads.measured_path().parent)
    threads.measured_path().write_text(text)
    assert threads.load_measured() is None


def test_settings_dialog_offers_the_measured_thread_count(qtbot):
    from app.ui.settings_dialog import SettingsDialog

    sampling = {
        "temperature": 0.8,
        "top_k": 40,
        "top_p": 0.95,
        "min_p": 0.05,
        "repeat_penalty": 1.0,
        "seed": -1,
        "max_tokens": 256,
    }
    engine = {"n_ctx": 4096, "threads": 0, "overflow": "shift"}
    plain = SettingsDialog("", sampling, engine, 8)
    qtbot.addWidget(plain)
    assert plain.use_measured is None
    dlg = SettingsDialog("", sampling, engine, 8, measured={"tg_threads": 3, "pp_threads": 4, "when": "now"})
    qtbot.addWidget(dlg)
    assert "3" in dlg.use_measured.text() and "4" in dlg.use_measured.toolTip()
    dlg.use_measured.click()
    assert dlg.values()[2]["threads"] == 3
