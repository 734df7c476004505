"""`llambda models list|import|remove [--json]` through app.library.cli."""

from __future__ import annotations

import io
import json
import os

import pytest

from app.library import cli
from tests.synth import write_tiny_model


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    parser = cli.configure_parser(__import__("argparse").ArgumentParser(prog="llambda models"))
    ns = parser.parse_args(list(argv))
    code = ns.func(ns, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_import_list_remove_json(tmp_path):
    src = write_tiny_model(tmp_path / "m.gguf", seed=7)
    code, out, err = run("import", str(src), "--json", "--ctx", "128")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "imported" and doc["model"]["name"] == "m"
    assert doc["preflight"]["verdict"] in ("ok", "warn", "refuse") and doc["preflight"]["n_ctx"] == 128

    code, out, _ = run("import", str(src), "--json")  # twice: one copy, exit 0
    assert code == 0
    assert json.loads(out)["status"] == "duplicate"
    code, out, _ = run("import", str(src))
    assert "already in your library as m" in out

    code, out, _ = run("list", "--json")
    [m] = json.loads(out)["models"]
    assert m["status"] == "ok" and os.path.exists(m["file"])
    code, out, _ = run("list")
    assert out.splitlines()[1].startswith("m ") and "F32" in out

    code, out, _ = run("remove", "m", "--json")
    assert code == 0 and json.loads(out)["status"] == "removed"
    assert json.loads(run("list", "--json")[1]) == {"models": []}


def test_damaged_file_exits_3_with_one_line(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 40)
    code, out, err = run("import", str(bad))
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and err.startswith("llambda: ")
    assert json.loads(run("list", "--json")[1]) == {"models": []}


def test_unknown_model_to_remove(tmp_path):
    code, _, err = run("remove", "nope")
    assert code == 1 and "no model named 'nope'" in err


def test_usage_error_exits_2():
    with pytest.raises(SystemExit) as e:
        cli.main(["frobnicate"])
    assert e.value.code == 2


def test_preflight_context_defaults_to_the_settings(tmp_path):
    from app.chats import ChatStore

    with ChatStore() as store:  # as the window's settings dialog saves it
        store.set_setting("engine", {"n_ctx": 512, "threads": 0, "overflow": "shift"})
    code, out, _ = run("import", str(write_tiny_model(tmp_path / "s.gguf", seed=8)), "--json")
    assert code == 0 and json.loads(out)["preflight"]["n_ctx"] == 512
