"""Models other desktop apps already downloaded: LM Studio, GPT4All, Jan and the Hugging Face
cache keep GGUF files in folders of their own. We look in those folders when they exist (no
network, no guessing of file names) and list the .gguf files found, to be linked in place.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

MAX_DEPTH = 8  # folders below an app's models folder that are searched
MAX_FILES = 500


@dataclass(frozen=True)
class FoundModel:
    app: str
    path: Path
    size: int


def other_app_folders(home: Path | None = None, env: Mapping[str, str] | None = None) -> list[tuple[str, Path]]:
    """(app, folder) for each known models folder that exists on this machine."""
    home = Path(home) if home is not None else Path.home()
    env = os.environ if env is None else env
    data = Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")
    cache = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
    hf = (
        Path(env["HF_HUB_CACHE"])
        if env.get("HF_HUB_CACHE")
        else (Path(env["HF_HOME"]) / "hub" if env.get("HF_HOME") else cache / "huggingface" / "hub")
    )
    candidates = [
        ("LM Studio", home / ".lmstudio" / "models"),
        ("LM Studio", home / ".cache" / "lm-studio" / "models"),
        ("GPT4All", data / "nomic.ai" / "GPT4All"),
        ("Jan", home / "jan" / "models"),
        ("Jan", data / "Jan" / "data" / "models"),
        ("Hugging Face cache", hf),
    ]
    if sys.platform == "darwin":
        candidates += [
            ("GPT4All", home / "Library" / "Application Support" / "nomic.ai" / "GPT4All"),
            ("Jan", home / "Library" / "Application Support" / "Jan" / "data" / "models"),
        ]
    elif sys.platform == "win32" and env.get("LOCALAPPDATA"):
        local = Path(env["LOCALAPPDATA"])
        candidates += [
            ("GPT4All", local / "nomic.ai" / "GPT4All"),
            ("Jan", Path(env.get("APPDATA", local)) / "Jan" / "data" / "models"),
        ]
    seen, out = set(), []
    for app, folder in candidates:
        try:
            real = folder.resolve()
        except OSError:
            continue
        if folder.is_dir() and real not in seen:
            seen.add(real)
            out.append((app, folder))
    return out


def find_models(folders: list[tuple[str, Path]]) -> list[FoundModel]:
    """The .gguf files under each folder (symlinks, as the Hugging Face cache uses, followed to
    their file), the largest first within an app; at most MAX_FILES in all."""
    found: list[FoundModel] = []
    for app, root in folders:
        root_depth = len(root.parts)
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            if len(Path(dirpath).parts) - root_depth >= MAX_DEPTH:
                dirnames[:] = []
            for name in filenames:
                if not name.lower().endswith(".gguf") or name.startswith("."):
                    continue
                p = Path(dirpath) / name
                try:
                    size = p.stat().st_size  # follows a snapshot's link to its blob
                except OSError:
                    continue
                if size > 0:
                    found.append(FoundModel(app, p, size))
                if len(found) >= MAX_FILES:
                    return found
    return found


__all__ = ["FoundModel", "other_app_folders", "find_models"]
