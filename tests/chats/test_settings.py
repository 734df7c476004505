"""Settings read from the store: defaults, stored values, and bad values falling back one by one."""

from __future__ import annotations

from app.chats import ChatStore
from app.chats.settings import ENGINE_DEFAULTS, SAMPLING_DEFAULTS, engine_settings, sampling_defaults


def test_defaults_when_nothing_is_stored():
    with ChatStore() as s:
        assert engine_settings(s) == ENGINE_DEFAULTS
        assert sampling_defaults(s) == SAMPLING_DEFAULTS


def test_stored_values_win_and_survive_a_reopen():
    with ChatStore() as s:
        s.set_setting("engine", {"n_ctx": 4096, "threads": 2, "overflow": "stop", "kv_budget_mb": 512})
        s.set_setting("sampling_defaults", {"temperature": 0.0, "top_k": 1})
    with ChatStore() as s:
        assert engine_settings(s) == {
            **ENGINE_DEFAULTS,
            "n_ctx": 4096,
            "threads": 2,
            "overflow": "stop",
            "kv_type": "f16",
            "kv_budget_mb": 512,
        }
        assert sampling_defaults(s) == {**SAMPLING_DEFAULTS, "temperature": 0.0, "top_k": 1}


def test_a_bad_value_falls_back_alone():
    with ChatStore() as s:
        s.set_setting("engine", {"n_ctx": "lots", "threads": 3, "overflow": "explode", "extra": 1, "kv_budget_mb": -1})
        s.set_setting("sampling_defaults", {"temperature": float("nan"), "top_p": 0.5, "seed": True})
        assert engine_settings(s) == {**ENGINE_DEFAULTS, "threads": 3}
        assert sampling_defaults(s) == {**SAMPLING_DEFAULTS, "top_p": 0.5}
        s.set_setting("engine", ["not", "a", "dict"])
        assert engine_settings(s) == ENGINE_DEFAULTS
