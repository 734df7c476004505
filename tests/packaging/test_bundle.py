"""The double-click bundle, built for real: packaging/build_bundle.sh into a temporary folder,
then `Llambda --self-test` headless from it. A PyInstaller build (~30-60 s on two cores) runs
once per session for all the tests here; .ci/run installs PyInstaller, Xvfb and xdotool.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIZE_BUDGET = 200 * 1024 * 1024  # bytes on disk; 171 MB when this was written (Linux x86-64)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle")
    env = dict(os.environ, PYTHON=sys.executable, DIST=str(out / "dist"), WORK=str(out / "work"))
    r = subprocess.run(
        ["sh", str(ROOT / "packaging" / "build_bundle.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out / "dist" / "Llambda"


def _headless_env(home: Path) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LLAMBDA_", "XDG_", "QT_", "PYTHON")) and k not in ("DISPLAY", "WAYLAND_DISPLAY")
    }
    env.update(HOME=str(home), QT_QPA_PLATFORM="offscreen")
    return env


def test_self_test_passes_from_the_bundle_and_leaves_home_alone(bundle, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    r = subprocess.run(
        [str(bundle / "Llambda"), "--self-test"], env=_headless_env(home), capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("llambda self-test: ok: tiny.gguf llama")
    assert "'Hello from Llambda!'" in lines[0] and " on offscreen: " in lines[0]
    assert "sentencepiece 10 tokens" in lines[0]
    if importlib.util.find_spec("app.ui.engine_adapter") is not None:
        assert "asked 'ping', answered 'Hello from Llambda!', closed" in lines[0]
    assert list(home.iterdir()) == []


def test_the_bundle_is_the_command_line_too(bundle, tmp_path):
    env = _headless_env(tmp_path)
    r = subprocess.run([str(bundle / "Llambda"), "--version"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("llambda ") and "kernels:" in r.stdout
    model = bundle / "_internal" / "resources" / "selftest" / "tiny.gguf"
    r = subprocess.run(
        [str(bundle / "Llambda"), "inspect", str(model), "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert '"supported": true' in r.stdout


def _files(bundle: Path) -> list[str]:
    """Regular files (PyInstaller links some libraries from the top level into their packages)."""
    return [str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file() and not p.is_symlink()]


def test_bundle_holds_what_the_window_needs_and_not_the_rest(bundle):
    files = _files(bundle)
    names = " ".join(files)
    for needed in (
        "resources/selftest/tiny.gguf",
        "resources/selftest/tiny-spm.gguf",
        "resources/light.qss",
        "resources/icons/llambda.svg",
        "app/_llk",
        "_cffi_backend",
        "tokenizers/tokenizers",
        "sentencepiece/_sentencepiece",
        "platforms/libqoffscreen.so",
        "platforms/libqxcb.so",
        "platforms/libqwayland.so",
        "iconengines/libqsvgicon.so",
        "linux/llambda.desktop",
        "linux/llambda-gguf.xml",
        "linux/install.sh",
        "linux/icons/hicolor/256x256/apps/llambda.png",
    ):
        assert needed in names, f"{needed} is missing from the bundle"
    for unwanted in (
        "libQt6Quick",
        "libQt6Qml",
        "libQt6WebEngine",
        "libQt63D",
        "libQt6Multimedia",
        "libQt6Network",
        "libQt6Pdf",
        "QtNetwork",
        "libqgtk3",
        "libqeglfs",
        "libqvnc",
        "qtvirtualkeyboard",
        "translations/",
        "gguf/",
        "pytest",
        "libgtk",
        "libcairo",
    ):
        assert unwanted not in names, f"{unwanted} should not be in the bundle"


def test_bundle_size_stays_in_budget(bundle):
    size = sum((bundle / f).stat().st_size for f in _files(bundle))
    print(f"bundle size: {size / 2**20:.1f} MiB")
    assert size < SIZE_BUDGET


def test_window_answers_under_xvfb(bundle, tmp_path):
    """A person's view: the bundle on an X server (xcb), the tiny model opened from the command
    line, "ping" typed and Enter; the stored conversation holds the answer, the screen shows it."""
    home = tmp_path / "llambda-home"
    shot = tmp_path / "screen.png"
    env = dict(os.environ, BUNDLE=str(bundle), LLAMBDA_HOME=str(home), PYTHON=sys.executable)
    r = subprocess.run(
        ["sh", str(ROOT / "packaging" / "screenshot_bundle.sh"), str(shot)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    db = sqlite3.connect(home / "data" / "chats.sqlite3")
    dump = "\n".join(db.iterdump())
    db.close()
    assert "Hello from Llambda!" in dump and "ping" in dump
    from PySide6.QtGui import QImage

    image = QImage(str(shot))
    assert (image.width(), image.height()) == (1400, 900)
    colours = {image.pixel(x, y) for x in range(0, 1000, 10) for y in range(0, 700, 10)}
    assert len(colours) > 10


def test_self_test_passes_on_the_reference_kernels(bundle, tmp_path):
    """A CPU without AVX2 runs the plain-C path (LLAMBDA_ISA=ref stands in for one)."""
    env = dict(_headless_env(tmp_path), LLAMBDA_ISA="ref")
    r = subprocess.run([str(bundle / "Llambda"), "--self-test"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " on ref (" in r.stdout and "'Hello from Llambda!'" in r.stdout
