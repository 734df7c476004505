"""Fixtures for the reliability suite (issue #22): folders that refuse writes, even to root, and
the window fixtures of tests/ui."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.ui.conftest import fake_engine, make_window  # noqa: F401 (fixtures used here too)


def refuses_writes(folder: Path) -> bool:
    """True when a new file cannot be created in `folder` (tried for real)."""
    probe = folder / ".reliability-probe"
    try:
        with open(probe, "x"):
            pass
    except OSError:
        return True
    probe.unlink()
    return False


@pytest.fixture
def read_only_folder():
    """`make(folder)` creates `folder` (with what is already in it) and makes it refuse new files:
    chmod 0555 for a normal user; for root, whom chmod does not stop, the immutable attribute
    (chattr +i, which binds root too). Skips only when neither works on this machine; the tests
    that use a folder under a regular file need neither and always run."""
    made: list[tuple[Path, str]] = []

    def make(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            r = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
            if r.returncode == 0:
                made.append((folder, "chattr"))
        else:
            os.chmod(folder, 0o555)
            made.append((folder, "chmod"))
        if not refuses_writes(folder):
            pytest.skip("no way to make a folder refuse writes here (root, and chattr +i refused)")
        return folder

    yield make
    for folder, how in reversed(made):
        if how == "chattr":
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
        else:
            os.chmod(folder, 0o755)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
