"""`llambda models search|files|download|token` against the fake Hub: results on stdout, each
failure one line on stderr with its exit code."""

from __future__ import annotations

import io
import json

from app.cli import main
from app.library import ModelLibrary
from tests.hub.fake_hub import GOOD_TOKEN, FakeFile, FakeRepo
from tests.models import SMOLLM2_SHA256


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_search_prints_repositories_with_downloads_and_likes(capsys, hub, tiny_repo, smol_repo):
    code, out, err = run(capsys, "models", "search", "GGUF")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["REPOSITORY", "DOWNLOADS", "LIKES"]
    assert lines[1].split() == [smol_repo.repo_id, "5,000", "5"]
    code, out, _ = run(capsys, "models", "search", "tiny", "--json")
    assert json.loads(out) == {"results": [{"repo_id": "test/tiny-GGUF", "downloads": 100, "likes": 5, "gated": False}]}


def test_files_lists_each_file_with_its_verdict(capsys, hub, smol_repo):
    code, out, err = run(capsys, "models", "files", smol_repo.repo_id)
    assert code == 0, err
    assert "licence: apache-2.0" in out.splitlines()[0]
    row = out.splitlines()[2]
    assert row.startswith("SmolLM2-135M-Instruct.Q4_1.gguf") and "Q4_1" in row and "ok: supported" in row
    code, out, _ = run(capsys, "models", "files", smol_repo.repo_id, "--json")
    (f,) = json.loads(out)["files"]
    assert f["verdict"]["supported"] and f["parts"][0]["sha256"] == SMOLLM2_SHA256


def test_download_then_the_model_is_in_the_library_and_opens(capsys, hub, smol_repo):
    code, out, err = run(capsys, "models", "download", smol_repo.repo_id, "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert code == 0, err
    assert out == (
        "downloaded SmolLM2-135M-Instruct.Q4_1.gguf (93.8 MB, SHA-256 checked) into your library as "
        "SmolLM2-135M-Instruct.Q4_1\n"
    )
    assert "download: 100%" in err  # progress lines (not a terminal: every 5 s and at the end)
    (e,) = ModelLibrary().list()
    assert e.sha256 == SMOLLM2_SHA256
    # It opens: the engine tokenizes with it by its library name.
    code, out, err = run(capsys, "tokenize", "SmolLM2-135M-Instruct.Q4_1", "Hello", "--json")
    assert code == 0 and json.loads(out) == [19556]
    code, out, _ = run(capsys, "models", "download", smol_repo.repo_id, "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert code == 0 and out == (
        "SmolLM2-135M-Instruct.Q4_1.gguf is already in your library as SmolLM2-135M-Instruct.Q4_1\n"
    )


def test_each_failure_is_one_line_with_an_exit_code(capsys, hub, tiny_gguf, monkeypatch):
    hub.add(FakeRepo("test/liar-GGUF", [FakeFile("liar-F32.gguf", tiny_gguf, sha256="0" * 64)]))
    hub.add(FakeRepo("test/gated-GGUF", [FakeFile("g-F32.gguf", tiny_gguf)], gated=True))
    cases = [
        (("models", "files", "nobody/nothing"), "nobody/nothing: no such repository"),
        (("models", "download", "test/liar-GGUF", "other.gguf"), "has no GGUF file 'other.gguf'"),
        (("models", "download", "test/liar-GGUF", "liar-F32.gguf"), "does not match the Hub's 000000000000"),
        (("models", "download", "test/gated-GGUF", "g-F32.gguf"), "is gated: accept its licence at"),
    ]
    for argv, said in cases:
        code, out, err = run(capsys, *argv)
        errors = [ln for ln in err.splitlines() if ln.startswith("llambda:")]
        assert code == 1 and out == "" and len(errors) == 1 and said in errors[0], (argv, err)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    code, out, err = run(capsys, "models", "search", "x")
    assert code == 1 and err.startswith("llambda: error: cannot reach 127.0.0.1:9") and err.count("\n") == 1
    assert ModelLibrary().list() == []


def test_token_set_is_kept_in_the_keyring_and_opens_a_gated_repo(capsys, hub, tiny_gguf, monkeypatch):
    hub.add(FakeRepo("test/gated-GGUF", [FakeFile("g-F32.gguf", tiny_gguf)], gated=True))
    monkeypatch.setattr("sys.stdin", io.StringIO(GOOD_TOKEN + "\n"))
    code, out, _ = run(capsys, "models", "token", "set")
    assert code == 0 and out.startswith("the token is stored in the keyring")
    code, out, err = run(capsys, "models", "download", "test/gated-GGUF", "g-F32.gguf")
    assert code == 0, err
    code, out, _ = run(capsys, "models", "token", "clear")
    assert out == "the token was removed\n"


def test_cancel_discards_a_paused_download(capsys, hub, smol_repo):
    f = smol_repo.files[0]
    f.drop_after, f.drops, f.status_after_drops, f.status_count = 20_000_000, 1, 503, 1
    code, _, err = run(capsys, "models", "download", smol_repo.repo_id, f.path)
    assert code == 1 and "HTTP 503" in err
    from app.hub.download import downloads_dir, pending_jobs

    assert len(pending_jobs()) == 1
    code, out, _ = run(capsys, "models", "download", smol_repo.repo_id, f.path, "--cancel")
    assert code == 0 and "nothing was kept" in out and list(downloads_dir().iterdir()) == []
