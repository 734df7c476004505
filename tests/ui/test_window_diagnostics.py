"""The window's side of diagnostics: a crash in a slot, Help → About, Help → Copy diagnostics,
the log-prompts switch, and the model identity shown on a reply (scripted engine)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from app import logs
from tests.ui.fake_engine import FakeEngine
from tests.ui.test_window_fake import loaded, send


@pytest.mark.qt_no_exception_capture  # the window's own hook must see the exception
def test_exception_in_a_slot_shows_a_dialog_saves_a_report_and_the_window_goes_on(
    qtbot, make_window, smollm2_path, monkeypatch, isolated_home
):
    from app.ui.crash import install_crash_handler

    monkeypatch.setenv("LLAMBDA_TEST_HOOKS", "1")
    logs.setup("window", force=True)
    w, engine = loaded(qtbot, make_window, smollm2_path)
    handler = install_crash_handler(w)
    try:
        handler.test_action.trigger()  # a real slot of the window raises
        qtbot.waitUntil(lambda: handler.dialog is not None and handler.dialog.isVisible(), timeout=5000)
        assert len(handler.reports) == 1
        report = handler.reports[0]
        assert report.parent == isolated_home / "logs" and report.name.startswith("crash-")
        body = report.read_text()
        assert "RuntimeError: deliberate test exception" in body and "Traceback" in body
        assert "kernel library" in body  # the versions ride along
        box = handler.dialog
        assert "RuntimeError: deliberate test exception" in box.text()
        assert "\n" not in handler.reasons[0]
        assert str(report) in box.informativeText()
        log = logs.log_path().read_text()
        assert "uncaught exception" in log and "Traceback" in log
        box.close()

        send(qtbot, w, "are you still there?")  # the window still answers
        last = w.state.messages()[-1]
        assert last.role == "assistant" and last.status == "complete" and last.content == engine.reply
    finally:
        handler.uninstall()


def test_about_names_every_component(qtbot, make_window):
    w = make_window(FakeEngine)
    w.about_action.trigger()
    qtbot.waitUntil(lambda: getattr(w, "about_box", None) is not None and w.about_box.isVisible(), timeout=5000)
    text = w.about_box.text()
    for name in (
        "git revision",
        "kernel library",
        "kernels in use",
        "Qt",
        "numpy",
        "tokenizers",
        "sentencepiece",
        "jinja2",
        "OS",
    ):
        assert name in text, name
    w.about_box.close()


def test_copy_diagnostics_puts_a_redacted_report_on_the_clipboard(qtbot, make_window):
    logs.setup("window", force=True)
    w = make_window(FakeEngine)
    w.log_prompts_action.setChecked(True)
    assert w.state.get("log_prompts") is True and logs.log_prompts()
    logs.log_text("user", "a very private question")
    w.copy_diagnostics_action.trigger()
    text = QApplication.clipboard().text()
    assert text.startswith("# Llambda diagnostics") and "## folders" in text
    assert "a very private question" not in text
    assert "Diagnostics copied" in w.notice.text()
    w.log_prompts_action.setChecked(False)
    assert not logs.log_prompts()


def test_a_reply_shows_which_model_answered_on_hover(qtbot, make_window, smollm2_path):
    from app import __version__
    from tests.models import SMOLLM2_SHA256

    w, engine = loaded(qtbot, make_window, smollm2_path)
    send(qtbot, w, "who answers?")
    reply = w.chat.messages[-1]
    tip = reply.toolTip()
    assert reply.role == "assistant" and "Q4_1" in tip and SMOLLM2_SHA256[:16] in tip
    assert f"Llambda {__version__}" in tip
    assert w.chat.messages[0].toolTip() == ""  # the user's own message has none
    conv = w.state.current()
    assert (conv.model_sha256, conv.model_quant, conv.app_version) == (SMOLLM2_SHA256, "Q4_1", __version__)
    w.show_current()  # rebuilt from the store: still there
    assert w.chat.messages[-1].toolTip() == tip


def test_window_a_then_b_then_a_gives_the_same_reply(qtbot, make_window, smollm2_path):
    """One window, the real engine, a seeded sampled reply: A in a new chat, B in another, A in a
    third gives A's text again (the engine's cache and the sampler keep nothing of B)."""
    from tests.ui.test_window_real import real_window
    from tests.ui.test_window_real import send as send_real

    logs.setup("window", force=True)
    w = real_window(qtbot, make_window, smollm2_path, temperature=0.8, seed=77, max_tokens=12)

    def ask(text):
        w.on_conversations_new_requested()
        send_real(qtbot, w, text)
        last = w.state.messages()[-1]
        assert last.role == "assistant" and last.status == "complete", last
        return last.content

    a1 = ask("Write one sentence about cats.")
    b = ask("Name three colours.")
    a2 = ask("Write one sentence about cats.")
    assert a1.strip() and a1 == a2 and b != a1
    # the stage log of that use: one line per stage, and none of the conversation's words
    lines = logs.log_path().read_text().splitlines()
    assert sum("preflight: SmolLM2" in ln for ln in lines) == 1
    assert sum("import: SmolLM2" in ln for ln in lines) == 1
    assert sum("model loaded:" in ln for ln in lines) == 1
    assert sum("generation:" in ln and "stop=" in ln for ln in lines) == 3
    assert not any("cats" in ln or "colours" in ln or a1.strip()[:20] in ln for ln in lines)
