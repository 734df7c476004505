"""User settings: sampling defaults, threads, context length, overflow policy, theme, last
model, window geometry. One JSON file in the user data folder, replaced atomically on save.

Loading never fails: a missing file gives the defaults; a value that is invalid falls back to
its default alone (the other values are kept); a file that is not JSON is kept aside as
`settings.json.damaged-<time>` and the defaults are used. Unknown keys are ignored.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from app.paths import atomic_write_text, settings_path

OVERFLOW_POLICIES = ("rolling_window", "truncate_middle", "stop_at_limit")
THEMES = ("system", "light", "dark")
SETTINGS_VERSION = 1
MAX_N_CTX = 1 << 20


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise ValueError(what)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class SamplingDefaults:
    """Sampler settings a new conversation starts with (the names llama.cpp uses)."""

    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64
    max_tokens: int | None = None        # None: until the model stops or the context is full
    seed: int | None = None              # None: a new seed each time

    def __post_init__(self):
        _check(_is_num(self.temperature) and 0 <= self.temperature <= 10, f"temperature {self.temperature!r}")
        _check(_is_int(self.top_k) and self.top_k >= 0, f"top_k {self.top_k!r}")
        _check(_is_num(self.top_p) and 0 < self.top_p <= 1, f"top_p {self.top_p!r}")
        _check(_is_num(self.min_p) and 0 <= self.min_p <= 1, f"min_p {self.min_p!r}")
        _check(_is_num(self.repeat_penalty) and 0 < self.repeat_penalty <= 10, f"repeat_penalty {self.repeat_penalty!r}")
        _check(_is_int(self.repeat_last_n) and self.repeat_last_n >= 0, f"repeat_last_n {self.repeat_last_n!r}")
        _check(self.max_tokens is None or (_is_int(self.max_tokens) and self.max_tokens > 0), f"max_tokens {self.max_tokens!r}")
        _check(self.seed is None or (_is_int(self.seed) and 0 <= self.seed < 2**64), f"seed {self.seed!r}")


@dataclass(frozen=True)
class Settings:
    sampling: SamplingDefaults = field(default_factory=SamplingDefaults)
    n_threads: int | None = None             # None: one per physical core
    n_ctx: int = 4096
    overflow_policy: str = "rolling_window"  # what to do when the context is full
    theme: str = "system"
    last_model: str | None = None            # a library name or hash
    system_prompt: str = ""                  # default for new conversations
    window_geometry: str | None = None       # opaque to this layer (e.g. base64 of Qt's saveGeometry)

    def __post_init__(self):
        _check(isinstance(self.sampling, SamplingDefaults), "sampling")
        _check(self.n_threads is None or (_is_int(self.n_threads) and 1 <= self.n_threads <= 1024),
               f"n_threads {self.n_threads!r}")
        _check(_is_int(self.n_ctx) and 16 <= self.n_ctx <= MAX_N_CTX, f"n_ctx {self.n_ctx!r}")
        _check(self.overflow_policy in OVERFLOW_POLICIES, f"overflow_policy {self.overflow_policy!r}")
        _check(self.theme in THEMES, f"theme {self.theme!r}")
        _check(self.last_model is None or isinstance(self.last_model, str), "last_model")
        _check(isinstance(self.system_prompt, str), "system_prompt")
        _check(self.window_geometry is None or isinstance(self.window_geometry, str), "window_geometry")

    def to_json(self) -> dict:
        d = asdict(self)
        d["version"] = SETTINGS_VERSION
        return d

    def with_(self, **changes) -> "Settings":
        """A copy with some values changed; `sampling` may be a dict of sampler changes."""
        s = changes.get("sampling")
        if isinstance(s, dict):
            changes["sampling"] = replace(self.sampling, **s)
        return replace(self, **changes)


def _lenient(cls, data: Any, problems: list[str], prefix: str = ""):
    """Build `cls` from a dict, keeping each valid value and defaulting each invalid one."""
    default = cls()
    if not isinstance(data, dict):
        if data is not None:
            problems.append(f"{prefix or 'settings'}: not an object")
        return default
    good = default
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name == "sampling":
            value = _lenient(SamplingDefaults, value, problems, "sampling.")
        elif isinstance(value, float) and value.is_integer() and str(f.type).startswith("int"):
            value = int(value)          # JSON written by other tools may say 4.0 for 4
        try:
            good = replace(good, **{f.name: value})
        except (ValueError, TypeError):
            problems.append(f"{prefix}{f.name}: invalid value {value!r}, using {getattr(default, f.name)!r}")
    return good


def settings_from_json(data: Any) -> tuple[Settings, list[str]]:
    """(settings, problems): every invalid value replaced by its default, each one named."""
    problems: list[str] = []
    return _lenient(Settings, data, problems), problems


def load_settings(path: str | os.PathLike | None = None) -> Settings:
    """The saved settings, or the defaults; never raises for a bad file (see module doc)."""
    p = Path(path) if path is not None else settings_path()
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return Settings()
    except OSError:
        return Settings()
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        try:
            os.replace(p, p.with_name(f"{p.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"))
        except OSError:
            pass
        return Settings()
    return settings_from_json(data)[0]


def save_settings(settings: Settings, path: str | os.PathLike | None = None) -> Path:
    """Write the settings atomically (temporary file, fsync, rename)."""
    p = Path(path) if path is not None else settings_path()
    return atomic_write_text(p, json.dumps(settings.to_json(), indent=2, ensure_ascii=False) + "\n")


def update_settings(path: str | os.PathLike | None = None, **changes) -> Settings:
    """Load, change some values (see `Settings.with_`), save, and return the result."""
    s = load_settings(path).with_(**changes)
    save_settings(s, path)
    return s


__all__ = ["Settings", "SamplingDefaults", "load_settings", "save_settings", "update_settings",
           "settings_from_json", "OVERFLOW_POLICIES", "THEMES"]
