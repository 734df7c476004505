"""Quantities as people read them: byte counts, times and counted things, the same text
everywhere they appear.

Standard library only, no `app` import: every layer (model, library, engine, command line,
window) may use it.
"""

from __future__ import annotations

import time


def format_bytes(n: float) -> str:
    """1024-based, one decimal above bytes: "512 B", "1.5 KB", "3.2 GB" (`llambda inspect`,
    `llambda models`, the pre-flight messages)."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1024 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PB"


def format_size(n: float, mb_digits: int = 0) -> str:
    """The window's short size: GB with two decimals from 1 GiB, MB below ("812 MB", "1.27 GB")."""
    return f"{n / 2**30:.2f} GB" if n >= 2**30 else f"{n / 2**20:.{mb_digits}f} MB"


def format_count(n: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun, singular for exactly one: "1 page", "2 pages", "1,024 tokens"."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def format_last_used(t: float | None) -> str:
    """A local date and time to the minute ("2025-03-01 14:05"), or "never" for no time."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "never"
