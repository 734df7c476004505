"""Settings: defaults, round trip, one bad value never loses the others, atomic saves."""

from __future__ import annotations

import json
import os

import pytest

from app import paths
from app.chats.settings import (
    SamplingDefaults, Settings, load_settings, save_settings, settings_from_json, update_settings,
)


def test_defaults_when_there_is_no_file(isolated_home):
    assert load_settings() == Settings()
    assert not paths.settings_path().exists()


def test_round_trip_in_the_data_folder(isolated_home):
    s = Settings(sampling=SamplingDefaults(temperature=0.2, seed=42, max_tokens=256), n_threads=2,
                 n_ctx=8192, overflow_policy="truncate_middle", theme="dark", last_model="SmolLM2",
                 system_prompt="Be kind.", window_geometry="AdnQywADAAA=")
    p = save_settings(s)
    assert p == paths.settings_path() and paths.data_dir() in p.parents
    assert load_settings() == s
    assert json.loads(p.read_text())["version"] == 1


def test_update_changes_only_what_is_named(isolated_home):
    update_settings(theme="light")
    s = update_settings(sampling={"top_k": 10}, last_model="x")
    assert (s.theme, s.sampling.top_k, s.sampling.temperature, s.last_model) == ("light", 10, 0.7, "x")
    assert load_settings() == s
    with pytest.raises(ValueError):
        update_settings(theme="neon")
    assert load_settings() == s


def test_one_bad_value_falls_back_alone():
    s, problems = settings_from_json({
        "theme": "dark", "n_ctx": -5, "n_threads": 4.0, "overflow_policy": "explode",
        "sampling": {"temperature": "hot", "top_p": 0.5, "seed": True}, "unknown": 1,
    })
    assert (s.theme, s.n_threads, s.sampling.top_p) == ("dark", 4, 0.5)
    assert (s.n_ctx, s.overflow_policy, s.sampling.temperature, s.sampling.seed) == (4096, "rolling_window", 0.7, None)
    assert len(problems) == 4 and all("invalid value" in p for p in problems)


def test_damaged_file_is_kept_aside(isolated_home):
    p = paths.settings_path()
    p.parent.mkdir(parents=True)
    p.write_bytes(b'{"theme": "da')
    assert load_settings() == Settings()
    assert [n for n in os.listdir(p.parent) if n.startswith("settings.json.damaged-")]


def test_failed_save_keeps_the_old_file(isolated_home, monkeypatch):
    save_settings(Settings(theme="dark"))
    monkeypatch.setattr(paths.os, "replace", lambda a, b: (_ for _ in ()).throw(OSError(28, "No space left")))
    with pytest.raises(OSError):
        save_settings(Settings(theme="light"))
    assert load_settings().theme == "dark"
    assert os.listdir(paths.settings_path().parent) == ["settings.json"]
