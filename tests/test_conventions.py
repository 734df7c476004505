"""Conventions the code keeps, checked rather than remembered: the linter's rules (configured in
pyproject.toml; RUF100 among them, so a `noqa` names a rule that is checked and needed), the
formatter on the files listed in pyproject.toml, mypy's types, and Qt signals emitted through
`app.ui.qt_fix.emit` (the binding leaks a reference on a bare `.emit(`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_tree_is_ruff_formatted():
    """`ruff format --check` over the whole tree ([tool.ruff.format] in pyproject.toml)."""
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--diff", "--no-cache", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_finds_nothing():
    """`python -m mypy` is clean: the files (app/) and the strictness per module are in
    pyproject.toml ([tool.mypy]); .ci/run also runs it before the tests."""
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr


BARE_EMIT = re.compile(r"\.emit\(")


def bare_emits(root: Path) -> list[str]:
    """`x.emit(` in app/, outside qt_fix.py (the one place that calls the binding's emit)."""
    found = []
    for path in sorted((root / "app").rglob("*.py")):
        if path.name == "qt_fix.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if BARE_EMIT.search(code):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    return found


def test_signals_are_emitted_through_qt_fix():
    assert bare_emits(ROOT) == [], "use app.ui.qt_fix.emit(signal, ...)"


def test_the_emit_check_sees_a_bare_emit(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "w.py").write_text("def f(s):\n    s.done.emit(1)  # streamed\n")
    assert bare_emits(tmp_path) == ["app/w.py:2: s.done.emit(1)  # streamed"]
