"""app.paths: every folder moves with LLAMBDA_HOME (tests never touch real user folders)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from app import paths


def test_llambda_home_moves_everything(isolated_home):
    home = Path(isolated_home)
    assert paths.cache_dir() == home / "cache"
    assert paths.models_dir() == home / "cache" / "models"
    assert paths.data_dir() == home / "data"
    assert paths.log_dir() == home / "logs"
    assert paths.chats_db_path().parent == paths.data_dir()
    real = [
        platformdirs.user_cache_dir("llambda"),
        platformdirs.user_data_dir("llambda"),
        platformdirs.user_log_dir("llambda"),
    ]
    for p in (paths.models_dir(), paths.data_dir(), paths.log_dir(), paths.chats_db_path()):
        assert all(not str(p).startswith(r) for r in real)


def test_finer_variables_win(monkeypatch, tmp_path):
    monkeypatch.setenv("LLAMBDA_MODELS_DIR", str(tmp_path / "m"))
    monkeypatch.setenv("LLAMBDA_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("LLAMBDA_LOG_DIR", str(tmp_path / "l"))
    assert paths.models_dir() == tmp_path / "m"
    assert paths.data_dir() == tmp_path / "d"
    assert paths.log_dir() == tmp_path / "l"


def test_without_overrides_platformdirs_is_used(monkeypatch):
    for v in ("LLAMBDA_HOME", "LLAMBDA_CACHE_DIR", "LLAMBDA_MODELS_DIR", "LLAMBDA_DATA_DIR", "LLAMBDA_LOG_DIR"):
        monkeypatch.delenv(v, raising=False)
    assert paths.models_dir() == Path(platformdirs.user_cache_dir("llambda", appauthor=False)) / "models"
    assert paths.data_dir() == Path(platformdirs.user_data_dir("llambda", appauthor=False))
    # data and cache are different folders: wiping the cache never takes conversations with it
    assert paths.data_dir() != paths.cache_dir()


def test_nothing_is_created_until_asked(isolated_home):
    paths.models_dir(), paths.data_dir(), paths.log_dir()
    assert os.listdir(isolated_home) == []


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "sub" / "f.json"
    paths.atomic_write_text(target, "old")
    assert target.read_text() == "old"

    def boom(*a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(paths.os, "replace", boom)
    try:
        paths.atomic_write_text(target, "new")
    except OSError:
        pass
    assert target.read_text() == "old"
    assert os.listdir(target.parent) == ["f.json"]


def test_real_user_folders_are_never_touched(tmp_path):
    from app.chats import ChatStore, engine_settings
    from app.library import ModelLibrary
    from tests.synth import write_tiny_model

    real = [
        Path(f(paths.APP_NAME, appauthor=False))
        for f in (platformdirs.user_cache_dir, platformdirs.user_data_dir, platformdirs.user_log_dir)
    ]
    before = {p: sorted(os.listdir(p)) if p.exists() else None for p in real}
    ModelLibrary().import_model(write_tiny_model(tmp_path / "m.gguf"))
    with ChatStore() as s:
        s.add_message(s.create_conversation("x"), "user", "hi")
        s.set_setting("engine", {"n_ctx": 1024})
        assert engine_settings(s)["n_ctx"] == 1024
    assert {p: sorted(os.listdir(p)) if p.exists() else None for p in real} == before
