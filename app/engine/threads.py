"""The thread count measured fastest on this machine (`llambda bench MODEL --threads auto`).

`fastest(rows)` picks, per test of a bench run, the thread count with the most tokens/s;
`save_measured` keeps the choice in the user data folder (threads.json) and `load_measured`
reads it back for the settings dialog, which offers it. The default thread count stays the
number of physical cores (the kernel library's `llk_cpu_count_physical`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from app.paths import atomic_write_text, data_dir, ensure_dir

__all__ = ["fastest", "save_measured", "load_measured", "measured_path"]


def fastest(rows: list[dict]) -> dict[str, dict]:
    """{"pp": row, "tg": row}: for each kind of test, the row with the most tokens/s (ties: fewer
    threads). Rows as `app.engine.cli.bench` returns them."""
    best: dict[str, dict] = {}
    for r in rows:
        kind = r["test"][:2]
        cur = best.get(kind)
        if cur is None or r["tok_s"] > cur["tok_s"] or (r["tok_s"] == cur["tok_s"] and r["threads"] < cur["threads"]):
            best[kind] = r
    return best


def measured_path() -> Path:
    return data_dir() / "threads.json"


def save_measured(best: dict[str, dict], model: str, tried: list[int]) -> None:
    record = {
        "model": model,
        "tried": tried,
        "when": time.strftime("%Y-%m-%d %H:%M"),
        **{f"{k}_threads": r["threads"] for k, r in best.items()},
        **{f"{k}_tok_s": r["tok_s"] for k, r in best.items()},
    }
    ensure_dir(data_dir())
    atomic_write_text(measured_path(), json.dumps(record, indent=1) + "\n")


def load_measured() -> dict | None:
    """The last saved measurement, or None (none yet, or an unreadable file)."""
    try:
        record = json.loads(measured_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    for k in ("pp_threads", "tg_threads"):
        if k in record and not (isinstance(record[k], int) and record[k] >= 1):
            return None
    return record if ("pp_threads" in record or "tg_threads" in record) else None
