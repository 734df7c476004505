#!/usr/bin/env python3
"""Run the real Llambda window under Xvfb through a scripted conversation and save screenshots.

    python scripts/screenshot.py [OUT_DIR] [--model FILE.gguf] [--home DIR]

OUT_DIR defaults to ./screenshots (git-ignored). Without a display, the script starts itself
again under `xvfb-run` (Debian: apt-get install xvfb). It uses a fresh LLAMBDA_HOME (a temporary
folder) unless --home is given, so it shows exactly what a new user sees: the empty first-run
window, the pre-flight and import of the model, loading, a streamed reply with live figures,
the window at 640×480, 800×600 and 1920×1080, the settings dialog, the models page, the
system prompt with an attachment, the dark theme, and the dialog for a damaged file.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCREEN = "1980x1160x24"  # room for the 1920×1080 shot
DEFAULT_MODEL = Path.home() / ".cache" / "llambda-test" / "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT = "Write a Python function that adds two numbers."
SIZES = ((640, 480), (800, 600), (1920, 1080))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default="screenshots", help="folder for the PNG files")
    p.add_argument(
        "--model",
        default=os.environ.get("LLAMBDA_SCREENSHOT_MODEL", str(DEFAULT_MODEL)),
        help="GGUF file to drop on the window (default: the SmolLM2 test model)",
    )
    p.add_argument("--home", help="LLAMBDA_HOME to use (default: a fresh temporary folder)")
    p.add_argument("--prompt", default=PROMPT)
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument(
        "--engine-double",
        action="store_true",
        help="development aid: use the test double from tests/ui instead of the real engine",
    )
    return p.parse_args(argv)


def ensure_display(argv) -> None:
    if os.environ.get("DISPLAY") or os.environ.get("LLAMBDA_UNDER_XVFB"):
        return
    xvfb = shutil.which("xvfb-run")
    if xvfb is None:
        sys.exit("screenshot.py: no display and no xvfb-run; install it (apt-get install xvfb)")
    env = dict(os.environ, LLAMBDA_UNDER_XVFB="1")
    env.pop("QT_QPA_PLATFORM", None)
    cmd = [xvfb, "-a", "-s", f"-screen 0 {SCREEN}", sys.executable, os.path.abspath(__file__), *argv]
    sys.exit(subprocess.call(cmd, env=env))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    ensure_display(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    out = Path(args.out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="llambda-shots-"))
    os.environ["LLAMBDA_HOME"] = str(home)
    sys.path.insert(0, str(ROOT))

    from PySide6.QtCore import QCoreApplication, QEventLoop
    from PySide6.QtGui import QGuiApplication

    from app.ui.main import make_app
    from app.ui.theme import apply_theme
    from app.ui.window import MainWindow

    app = make_app([sys.argv[0]])
    apply_theme(app, dark=False)
    factory = None
    if args.engine_double:
        from tests.ui.fake_engine import FakeEngine

        factory = functools.partial(FakeEngine, delay=0.03)
    window = MainWindow(engine_factory=factory)
    window.resize(1320, 840)
    window.move(20, 20)
    window.show()
    saved: list[str] = []

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            QCoreApplication.processEvents(QEventLoop.AllEvents, 20)
            time.sleep(0.01)

    def wait_until(cond, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > end:
                raise SystemExit(f"screenshot.py: timed out waiting for {what}")
            pump(0.02)

    def shot(name: str, widget=None, settle: float = 0.3) -> None:
        pump(settle)
        if widget is None:
            # the whole window with its frame and any dialog over it, as the screen shows it
            g = window.frameGeometry()
            pix = QGuiApplication.primaryScreen().grabWindow(0, g.x(), g.y(), g.width(), g.height())
            if pix.isNull() or pix.width() < 10:
                pix = window.grab()
        else:
            pix = widget.grab()
        path = out / f"{name}.png"
        pix.save(str(path))
        saved.append(str(path))
        print(f"saved {path}", flush=True)

    pump(0.5)
    shot("01-first-run")
    window._show_drop_overlay(True)  # what a file dragged over the window looks like
    shot("01b-dragging-a-file")
    window._show_drop_overlay(False)

    window.open_model_file(args.model)
    wait_until(lambda: window.preflight.get("path") or window.errors or window.model_info, 60, "the pre-flight check")
    wait_until(lambda: window.progress.value() > 0 or window.model_info or window.errors, 60, "the import")
    shot("02-preflight-and-import")
    wait_until(lambda: window.model_info is not None or window.errors, 300, "the model to load")
    if window.errors:
        shot("02b-error")
        print(f"screenshot.py: the model did not load: {window.errors[-1]}", file=sys.stderr)
        window.close()
        return 1
    shot("03-ready")

    window.state.put("sampling_defaults", {"max_tokens": args.max_tokens, "temperature": 0.0, "seed": 7})
    window.input.setPlainText(args.prompt)
    window.send()
    wait_until(
        lambda: window.state.reply is not None and len(window.state.reply.text) > 40 or not window.generating,
        120,
        "the first tokens",
    )
    shot("04-streaming", settle=0.05)  # a small model writes ~300 tokens/s: catch it mid-reply
    wait_until(lambda: not window.generating, 300, "the end of the reply")
    pump(1.0)
    shot("05-reply")

    window.input.setPlainText("Thanks! Now say it as a haiku.")
    window.send()
    wait_until(lambda: not window.generating, 300, "the second reply")
    window.on_conversations_new_requested()
    window.input.setPlainText("What is a GGUF file?")
    window.send()
    wait_until(lambda: not window.generating, 300, "the third reply")
    shot("06-two-conversations")

    for w, h in SIZES:  # the layout at a small laptop, an old screen, full HD
        window.resize(w, h)
        pump(0.6)
        shot(f"06-size-{w}x{h}")
    window.resize(1320, 840)
    pump(0.3)

    dlg = window.open_settings()
    pump(0.3)
    shot("07-settings")
    dlg.reject()

    models = window.open_models()  # the models page
    pump(0.5)
    shot("07b-models")
    models.reject()
    note = home / "notes.md"  # an attachment waiting to be sent
    note.write_text("# Notes\n\nLlambda runs GGUF models on the CPU.\n")
    window.attach_file(str(note))
    window.system_bar.toggle.setChecked(True)  # the system prompt, opened with its presets
    pump(0.6)
    shot("07c-system-prompt-and-attachment")
    window.system_bar.toggle.setChecked(False)
    window.clear_attachments()

    apply_theme(app, dark=True)
    window.conversations.list.setCurrentRow(1)
    pump(0.5)
    shot("08-dark")
    apply_theme(app, dark=False)

    bad = home / "damaged.gguf"
    bad.write_bytes(Path(args.model).read_bytes()[:4096])
    window.open_model_file(str(bad))
    wait_until(lambda: window.error_dialog is not None and window.error_dialog.isVisible(), 60, "the error dialog")
    shot("09-damaged-file")
    window.error_dialog.accept()

    window.close()
    print(f"{len(saved)} screenshots in {out}")
    if not args.home:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
