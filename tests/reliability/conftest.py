"""Fixtures for the reliability suite (issue #22): folders that refuse writes, even to root, and
the window fixtures of tests/ui."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
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


class SmallDisk:
    """A tmpfs of a few MB mounted for one test: a real filesystem that really fills up.

    `fill()` writes a filler file until the kernel answers ENOSPC (the disk is then full to the
    last byte); `free()` removes it (space returns)."""

    def __init__(self, path: Path):
        self.path = path
        self.filler = path / "filler.bin"

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 20, 1 << 12, 1):
                block = b"\0" * size
                while True:
                    try:
                        os.write(fd, block)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    @property
    def available(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize


@pytest.fixture
def small_disk(tmp_path):
    """`make(size)` mounts a tmpfs of `size` bytes (mount -t tmpfs, as root) and returns a
    SmallDisk. Skips, saying why, where the test cannot mount (not root, or no permission in
    this container)."""
    mounted: list[Path] = []

    def make(size: int) -> SmallDisk:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        if not sys.platform.startswith("linux"):
            pytest.skip("disk-full tests mount a tmpfs: Linux only")
        if os.geteuid() != 0:
            pytest.skip("disk-full tests mount a tmpfs, which needs root (mount -t tmpfs)")
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={int(size)},mode=0755", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
        mounted.append(where)
        return SmallDisk(where)

    yield make
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
