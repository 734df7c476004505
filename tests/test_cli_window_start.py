"""`llambda WORD`: a mistyped command is not taken for a file, and a window that cannot open (no
display) says so in one line with exit 2, instead of Qt aborting the process."""

from __future__ import annotations

import os
import subprocess
import sys


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=120, env=env)


def no_display_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    return env


def test_unknown_command_lists_the_commands():
    r = run("doctr", env=no_display_env())
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == "llambda: error: no such command or file: doctr"
    for name in ("inspect", "generate", "chat", "models"):
        assert f"  {name} " in r.stderr
    assert "Traceback" not in r.stderr and "platform plugin" not in r.stderr


def test_no_display_is_one_line_and_exit_2(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    for args in ((), (str(model),)):
        r = run(*args, env=no_display_env())
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and "no display" in r.stderr and "llambda chat" in r.stderr


def test_display_without_a_server_is_one_line_and_exit_2():
    env = {**no_display_env(), "DISPLAY": ":93"}  # no X server on :93 here
    r = run(env=env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "DISPLAY=:93" in r.stderr


def test_offscreen_platform_needs_no_display():
    from app.cli import display_problem

    saved = dict(os.environ)
    try:
        for k in ("DISPLAY", "WAYLAND_DISPLAY"):
            os.environ.pop(k, None)
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        assert display_problem() is None
        os.environ["QT_QPA_PLATFORM"] = "xcb"
        assert "no display" in display_problem()
    finally:
        os.environ.clear()
        os.environ.update(saved)
