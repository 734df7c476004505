"""A wheel carries resources/ inside the package (setup.py's build_py copies it to
app/resources/), and app.bundled finds it there first. The whole wheel (built, installed into a
fresh venv, self-tested) is checked by .ci/run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_build_py_puts_the_resources_inside_the_package(tmp_path):
    r = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    shipped = sorted(
        p.relative_to(ROOT / "resources").as_posix() for p in (ROOT / "resources").rglob("*") if p.is_file()
    )
    copied = sorted(
        p.relative_to(tmp_path / "app" / "resources").as_posix()
        for p in (tmp_path / "app" / "resources").rglob("*")
        if p.is_file()
    )
    assert "selftest/tiny.gguf" in shipped and copied == shipped
    # app.bundled, imported from that build, looks inside the package
    r = subprocess.run(
        [sys.executable, "-c", "import app.bundled as b; print(b.resources_dir())"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == tmp_path / "app" / "resources"


def test_source_tree_finds_its_resources():
    from app.bundled import resource

    assert resource("selftest/tiny.gguf").is_file()
    assert resource("light.qss").is_file() and resource("icons/llambda.svg").is_file()
