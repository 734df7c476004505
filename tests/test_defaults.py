"""One source of defaults: every entry point (command-line flags, the window's settings, the
engine's sampler and loader, the window's engine adapter) starts from app/defaults.py's values.
Each check reads the entry point's own default by introspection, so a literal typed anywhere
else that disagrees fails here."""

from __future__ import annotations

import argparse
import dataclasses
import inspect

import pytest

from app import defaults as D


def _parser_defaults(name: str) -> dict:
    from app.cli import build_parser

    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    sp = sub.choices[name]
    return {a.dest: a.default for a in sp._actions if a.dest != "help"}


SAMPLING_FLAGS = {
    "temperature": D.TEMPERATURE,
    "top_k": D.TOP_K,
    "top_p": D.TOP_P,
    "min_p": D.MIN_P,
    "repeat_penalty": D.REPEAT_PENALTY,
    "frequency_penalty": D.FREQUENCY_PENALTY,
    "presence_penalty": D.PRESENCE_PENALTY,
    "penalty_last_n": D.PENALTY_LAST_N,
    "seed": D.seed_or_none(D.SEED),
    "max_tokens": D.MAX_TOKENS,
}


@pytest.mark.parametrize("command", ["generate", "chat"])
def test_cli_flags_default_to_the_one_definition(command):
    got = _parser_defaults(command)
    for dest, want in SAMPLING_FLAGS.items():
        assert got[dest] == want, f"llambda {command} --{dest.replace('_', '-')}"
    assert got["threads"] == D.THREADS
    assert got["batch"] == D.N_BATCH
    assert got["kv_type"] == D.KV_TYPE
    assert got["ctx"] is None  # None: the engine's default (checked below)
    if command == "chat":
        assert got["context_policy"] == D.OVERFLOW
    assert got["speculation"] == D.SPECULATION and got["draft_max"] == D.DRAFT_MAX


def test_serve_flags_default_to_the_one_definition():
    got = _parser_defaults("serve")
    assert got["threads"] == D.THREADS
    assert got["batch"] == D.N_BATCH
    assert got["kv_type"] == D.KV_TYPE
    assert got["ctx"] is None  # None: the engine's default (checked below)


@pytest.mark.parametrize("command", ["generate", "chat", "serve"])
def test_every_kv_type_is_offered(command):
    from app.cli import build_parser

    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    kv = next(a for a in sub.choices[command]._actions if a.dest == "kv_type")
    assert tuple(kv.choices) == D.KV_TYPES, f"llambda {command} --kv-type"


def test_sampler_dataclass_defaults():
    from app.engine.sampler import SamplerSettings

    fields = {f.name: f.default for f in dataclasses.fields(SamplerSettings)}
    for name, want in SAMPLING_FLAGS.items():
        if name != "max_tokens":
            assert fields[name] == want, f"SamplerSettings.{name}"


def test_engine_defaults():
    from app.engine.engine import DEFAULT_N_CTX, Chat, Engine

    assert DEFAULT_N_CTX == D.N_CTX
    sig = inspect.signature(Engine.__init__).parameters
    assert sig["n_threads"].default == D.THREADS
    assert sig["n_batch"].default == D.N_BATCH
    assert sig["kv_type"].default == D.KV_TYPE
    assert sig["speculation"].default == D.SPECULATION and sig["draft_max"].default == D.DRAFT_MAX
    spec = inspect.signature(Engine.set_speculation).parameters
    assert spec["mode"].default == D.SPECULATION and spec["draft_max"].default == D.DRAFT_MAX
    assert inspect.signature(Chat.send).parameters["max_tokens"].default == D.MAX_TOKENS
    assert inspect.signature(Chat.__init__).parameters["context_policy"].default == D.OVERFLOW


def test_window_settings_defaults(tmp_path):
    from app.chats import ChatStore, engine_settings, sampling_defaults

    with ChatStore(tmp_path / "c.sqlite3") as store:
        s = sampling_defaults(store)
        e = engine_settings(store)
    assert s == D.SAMPLING
    assert e == D.ENGINE
    for k in ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "max_tokens"):
        assert s[k] == SAMPLING_FLAGS[k], k


def test_window_adapter_fills_missing_settings_with_the_defaults():
    from app.engine.sampler import SamplerSettings
    from app.ui.engine_adapter import sampler_settings

    assert sampler_settings({}) == SamplerSettings(seed=None)
    assert sampler_settings(dict(D.SAMPLING)) == SamplerSettings(seed=None)
