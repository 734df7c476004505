"""The window with a scripted engine double: the whole chat flow without waiting for a real model.

The same flows run against the real engine and SmolLM2 in test_window_real.py once it is there.
"""

from __future__ import annotations

from PySide6.QtCore import Qt

from app import defaults as D
from app.ui.chat_view import EMPTY_TEXT, CodeBlock
from tests.ui.conftest import drop_file, least_stall
from tests.ui.fake_engine import FakeEngine


def loaded(qtbot, make_window, smollm2_path, engine=None):
    engine = engine or FakeEngine()
    w = make_window(lambda: engine)
    assert drop_file(w.chat.viewport(), smollm2_path)
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=20000)
    return w, engine


def send(qtbot, w, text):
    w.input.setPlainText(text)
    qtbot.keyClick(w.input, Qt.Key_Return)
    qtbot.waitUntil(lambda: not w.generating, timeout=20000)


def test_first_run_shows_how_to_start(make_window):
    w = make_window(FakeEngine)
    assert w.windowTitle() == "Llambda"
    assert w.chat.empty.isVisible() and w.chat.empty.text() == EMPTY_TEXT
    assert "Drop a GGUF" in w.chat.empty.text()
    assert not w.send_button.isEnabled()
    assert w.model_picker.count() == 1


def test_drop_imports_then_loads_then_ready(qtbot, make_window, smollm2_path):
    w = make_window(FakeEngine)
    seen = {}
    stages = []
    w.worker.preflight_done.connect(lambda f: stages.append("preflight"))
    w.worker.import_progress.connect(lambda d, t: stages.append("import") if stages[-1:] != ["import"] else None)
    w.worker.load_started.connect(lambda f: stages.append("load"))
    w.worker.model_loaded.connect(lambda f: stages.append("ready"))
    assert drop_file(w.chat.viewport(), smollm2_path, seen)
    assert seen["overlay"] and not w.drop_overlay.isVisible()
    # each queued connection is its own event: the window's slot can set model_info before the
    # test's own slot of the same signal has run
    qtbot.waitUntil(lambda: w.model_info is not None and stages[-1:] == ["ready"], timeout=20000)
    assert stages == ["preflight", "import", "load", "ready"]
    assert w.preflight_label.text().startswith(("OK", "WARN"))
    assert "llama" in w.preflight_label.text()
    assert w.model_picker.count() == 2 and w.model_picker.currentIndex() == 1
    assert w.info_panel.values["Architecture"].text() == "llama"
    assert w.info_panel.values["Quantization"].text() == "Q4_1"
    assert w.send_button.isEnabled() and "Ready" in w.chat.empty.text()
    assert w.library().list()[0].quantization == "Q4_1"


def test_dropping_a_file_already_in_the_library_selects_it(qtbot, make_window, smollm2_path):
    w, _ = loaded(qtbot, make_window, smollm2_path)
    w.model_info = None
    assert drop_file(w, smollm2_path)
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=20000)
    assert "already in your library" in w.notice.text()
    assert len(w.library().list()) == 1 and w.model_picker.currentIndex() == 1


def test_damaged_file_gives_a_dialog_and_the_window_stays_usable(qtbot, make_window, tmp_path, smollm2_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(open(smollm2_path, "rb").read(5000))
    w = make_window(FakeEngine)
    assert drop_file(w.input, bad)
    qtbot.waitUntil(lambda: w.error_dialog is not None and w.error_dialog.isVisible(), timeout=10000)
    reason = w.error_dialog.text()
    assert "\n" not in reason and "broken.gguf" in reason
    assert not w.model_busy and w.open_button.isEnabled()
    w.error_dialog.accept()
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("hello")
    assert drop_file(w, not_gguf)
    qtbot.waitUntil(lambda: len(w.errors) == 2, timeout=10000)
    assert w.library().list() == []


def test_send_streams_markdown_and_keeps_text_literal(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path)
    batches = []
    w.worker.token_generated.connect(lambda rid, pieces: batches.append(pieces))
    send(qtbot, w, "Hello <b>there</b>\nsecond line")
    assert 1 < len(batches) < 70  # batched, not one signal per token
    user, reply = w.chat.messages
    assert user.parts[0].textFormat() == Qt.PlainText and user.parts[0].text() == "Hello <b>there</b>\nsecond line"
    assert reply.text == engine.reply and reply.status == "complete"
    assert any(isinstance(p, CodeBlock) and p.code == "print('<b>hi</b>')" for p in reply.parts)
    html = "".join(p.text() for p in reply.parts if not isinstance(p, CodeBlock))
    assert "<b>bold</b>" in html and "&lt;script&gt;" in html and "<script>" not in html
    msgs = w.state.messages()
    assert [m.role for m in msgs] == ["user", "assistant"] and msgs[1].content == engine.reply
    assert w.state.current().title == "Hello <b>there</b> second line"
    assert engine.calls[0][0] == [{"role": "user", "content": "Hello <b>there</b>\nsecond line"}]


def test_shift_enter_adds_a_line(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path)
    qtbot.keyClicks(w.input, "a")
    qtbot.keyClick(w.input, Qt.Key_Return, Qt.ShiftModifier)
    qtbot.keyClicks(w.input, "b")
    assert w.input.toPlainText() == "a\nb" and not engine.calls


def test_stop_regenerate_edit(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path, FakeEngine(delay=0.02))
    w.input.setPlainText("first")
    w.send()
    qtbot.waitUntil(lambda: len(w.state.reply.text if w.state.reply else "") > 10, timeout=10000)
    qtbot.keyClick(w, Qt.Key_Escape)
    qtbot.waitUntil(lambda: not w.generating, timeout=10000)
    stopped = w.state.messages()[-1]
    assert stopped.status == "interrupted" and 0 < len(stopped.content) < len(engine.reply)
    assert w.chat.messages[-1].status_label.text() == "(stopped)"

    engine.delay = 0.0
    w.regenerate()
    qtbot.waitUntil(lambda: not w.generating, timeout=10000)
    msgs = w.state.messages()
    assert [m.role for m in msgs] == ["user", "assistant"] and msgs[1].content == engine.reply
    assert len(engine.calls) == 2 and engine.calls[1][0] == engine.calls[0][0]

    w.chat.messages[0].edit_button.click()
    assert w.input.toPlainText() == "first" and w.edit_banner.isVisible()
    w.input.setPlainText("first, edited")
    w.send()
    qtbot.waitUntil(lambda: not w.generating, timeout=10000)
    msgs = w.state.messages()
    assert [(m.role, m.content) for m in msgs] == [("user", "first, edited"), ("assistant", engine.reply)]
    assert engine.calls[-1][0] == [{"role": "user", "content": "first, edited"}]


def test_conversations_switch_rename_delete_undo_search(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path)
    send(qtbot, w, "apples are red")
    first = w.state.current_id
    qtbot.keyClick(w, Qt.Key_N, Qt.ControlModifier)
    assert w.state.current_id != first and w.chat.messages == []
    send(qtbot, w, "bananas are yellow")
    second = w.state.current_id
    assert w.conversations.list.count() == 2
    w.conversations.list.setCurrentItem(w.conversations.item_for(first))
    assert w.state.current_id == first and w.chat.messages[0].text == "apples are red"
    w.conversations.item_for(first).setText("Fruit")
    assert w.state.store.get_conversation(first).title == "Fruit"
    qtbot.keyClick(w, Qt.Key_F, Qt.ControlModifier)
    qtbot.keyClicks(w.conversations.search, "banan")
    assert w.conversations.list.count() == 1 and w.conversations.current_id() in (None, second)
    w.conversations.search.clear()
    w.conversations.list.setCurrentItem(w.conversations.item_for(second))
    w.conversations.delete_button.click()
    assert w.conversations.list.count() == 1 and w.conversations.undo_bar.isVisible()
    w.conversations.undo_button.click()
    assert w.conversations.list.count() == 2 and w.state.current_id == second
    assert w.chat.messages[0].text == "bananas are yellow"


def test_restart_finds_history_settings_and_geometry(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path)
    send(qtbot, w, "remember me")
    dlg = w.open_settings()
    dlg.system_prompt.setPlainText("You are terse.")
    dlg.temperature.setValue(0.3)
    dlg.seed.setValue(42)
    dlg.threads.setValue(1)
    dlg.overflow.setCurrentIndex(1)
    dlg.kv_budget.setValue(512)
    dlg.accept()
    qtbot.waitUntil(lambda: w.model_info is not None and not w.model_busy, timeout=10000)
    w.resize(798, 520)  # the offscreen screen is 800 wide
    conv = w.state.current_id
    w.close()

    w2 = make_window(lambda: FakeEngine())
    assert (w2.size().width(), w2.size().height()) == (798, 520)
    assert w2.conversations.list.count() == 1
    assert w2.state.current_id == conv and w2.conversations.current_id() == conv  # reopened
    assert [m.text for m in w2.chat.messages] == ["remember me", engine.reply]
    assert w2.state.current().system_prompt == "You are terse."
    assert w2.state.sampling()["temperature"] == 0.3 and w2.state.sampling()["seed"] == 42
    assert w2.state.engine_settings() == {
        **D.ENGINE,
        "n_ctx": D.N_CTX,
        "threads": 1,
        "overflow": "stop",
        "kv_type": D.KV_TYPE,
        "kv_budget_mb": 512,
    }
    assert w2.load_last_used()
    qtbot.waitUntil(lambda: w2.model_info is not None, timeout=10000)
    e2 = w2.worker._engine
    send(qtbot, w2, "again")
    sent, settings = e2.calls[0]
    assert sent[0] == {"role": "system", "content": "You are terse."}
    assert sent[1:] == [
        {"role": "user", "content": "remember me"},
        {"role": "assistant", "content": engine.reply},
        {"role": "user", "content": "again"},
    ]
    assert settings["temperature"] == 0.3 and settings["overflow"] == "stop"


def visible_markers(w):
    return [m for m in w.chat.findChildren(type(w.chat.empty), "shiftMarker") if m.isVisibleTo(w)]


def test_context_shift_is_marked(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path, FakeEngine(shift_after=5))
    send(qtbot, w, "long")
    markers = visible_markers(w)
    assert len(markers) == 1 and "dropped" in markers[0].text()
    assert w.state.messages()[-1].timings["context_shifts"] == 1
    w.on_conversations_new_requested()
    w.conversations.list.setCurrentItem(w.conversations.item_for(w.state.store.list_conversations()[-1].id))
    assert len(visible_markers(w)) == 1


def test_stats_bar_moves_during_generation(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path, FakeEngine(delay=0.01))
    seen = []
    w.worker.stats_updated.connect(lambda d: seen.append(d))
    start = w.stats.updates
    send(qtbot, w, "go")
    assert len(seen) >= 2 and w.stats.updates - start >= 3
    text = w.stats.text()
    assert "gen " in text and "tok/s" in text and "first token" in text and "context " in text
    assert "RAM" in text and "model 9" in text and "threads" in text and "/2" in text
    assert any(d.get("threads_busy", 0) > 0 for d in seen)


def test_load_failure_dialog(qtbot, make_window, smollm2_path):
    w = make_window(lambda: FakeEngine(fail_load="cannot map the weights"))
    drop_file(w, smollm2_path)
    qtbot.waitUntil(lambda: w.error_dialog is not None and w.error_dialog.isVisible(), timeout=20000)
    assert w.error_dialog.text() == "cannot map the weights" and w.model_info is None
    assert w.chat.empty.text() == EMPTY_TEXT


def test_every_control_has_an_accessible_name(make_window):
    from PySide6.QtWidgets import QAbstractButton, QComboBox, QLineEdit, QPlainTextEdit, QProgressBar

    w = make_window(FakeEngine)
    missing = [
        c.objectName() or c.text() if hasattr(c, "text") else c.objectName()
        for kind in (QAbstractButton, QComboBox, QLineEdit, QPlainTextEdit, QProgressBar)
        for c in w.findChildren(kind)
        if not c.accessibleName()
        and c.isVisibleTo(w)
        and c.parent() is not None
        and type(c.parent()).__name__ != "QLineEdit"
    ]
    assert missing == []


def test_stalls_stay_under_50ms(qtbot, make_window, smollm2_path):
    """Import (real, 98 MB), load and generation run in the worker: the UI thread never stalls
    50 ms (a 5 ms QTimer probe; see least_stall for the retry on a shared machine)."""

    def run(probe):
        w = make_window(lambda: FakeEngine(delay=0.002, load_seconds=0.3))
        probe.start()
        drop_file(w, smollm2_path)
        qtbot.waitUntil(lambda: w.model_info is not None, timeout=20000)
        send(qtbot, w, "measure")
        probe.stop()
        w.close()

    assert least_stall(run) < 50


def test_copy_buttons(qtbot, make_window, smollm2_path):
    from PySide6.QtGui import QGuiApplication

    w, engine = loaded(qtbot, make_window, smollm2_path)
    send(qtbot, w, "copy <this>")
    w.chat.messages[0].copy_button.click()
    assert QGuiApplication.clipboard().text() == "copy <this>"
    w.chat.messages[1].copy_button.click()
    assert QGuiApplication.clipboard().text() == engine.reply
    code = next(p for p in w.chat.messages[1].parts if isinstance(p, CodeBlock))
    code.copy_button.click()
    assert QGuiApplication.clipboard().text() == "print('<b>hi</b>')"


def test_cancel_import_keeps_nothing(qtbot, make_window, smollm2_path):
    w = make_window(FakeEngine)
    w.worker.preflight_done.connect(lambda _facts: w.worker.cancel(), Qt.DirectConnection)
    drop_file(w, smollm2_path)
    qtbot.waitUntil(lambda: "cancelled" in w.notice.text(), timeout=20000)
    assert w.library().list() == [] and w.model_info is None and not w.model_busy
    assert not [p for p in w.library().folder.iterdir() if p.suffix in (".part", ".gguf")]


def test_search_finds_words_inside_messages(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path)
    send(qtbot, w, "first topic")
    w.on_conversations_new_requested()
    engine.reply = "zebras are striped"
    send(qtbot, w, "second topic")
    w.conversations.search.setText("zebra")
    assert w.conversations.list.count() == 1
    assert w.conversations.list.item(0).text() == "second topic"
    w.conversations.search.setText("topic")
    assert w.conversations.list.count() == 2


def test_themes_and_shortcuts(make_window):
    from PySide6.QtWidgets import QApplication

    from app.ui.theme import apply_theme

    w = make_window(FakeEngine)
    app = QApplication.instance()
    assert apply_theme(app, dark=True) == "dark" and "#1e1f22" in app.styleSheet()
    assert apply_theme(app, dark=False) == "light" and "#f7f7f8" in app.styleSheet()
    keys = {a.shortcut().toString() for a in w.actions()}
    assert {"Ctrl+N", "Ctrl+F", "Ctrl+O", "Esc"} <= keys


def test_the_stall_probe_sees_work_on_the_ui_thread(qtbot):
    """The probe's oracle: 120 ms of work on the UI thread is a stall the machine does not excuse."""
    import time as _time

    from PySide6.QtCore import QTimer

    def run(probe):
        probe.start()
        qtbot.wait(300)
        QTimer.singleShot(0, lambda: _time.sleep(0.12))
        qtbot.wait(300)
        probe.stop()

    assert least_stall(run, attempts=1) >= 110


def test_huge_user_text_is_shown_cut_and_copied_whole(qtbot, make_window, smollm2_path):
    from PySide6.QtGui import QGuiApplication

    w, engine = loaded(qtbot, make_window, smollm2_path)
    huge = "x" * 300_000
    w.input.setPlainText(huge)
    w.send()
    qtbot.waitUntil(lambda: not w.generating, timeout=20000)
    label = w.chat.messages[0].parts[0]
    assert len(label.text()) < 21_000 and "more characters not shown" in label.text()
    assert engine.calls[-1][0][-1]["content"] == huge and w.state.messages()[0].content == huge
    w.chat.messages[0].copy_button.click()
    assert QGuiApplication.clipboard().text() == huge


def test_model_picker_loads_a_library_model(qtbot, make_window, smollm2_path):
    from app.library import ModelLibrary

    ModelLibrary().import_model(smollm2_path)
    w = make_window(FakeEngine)
    assert w.model_picker.count() == 2 and w.model_info is None
    w.model_picker.setCurrentIndex(1)
    w.model_picker.activated.emit(1)
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=20000)
    assert w.worker._engine.loaded.endswith(".gguf") and w.info_panel.values["Quantization"].text() == "Q4_1"


RUN_WINDOW = """
import argparse, sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from tests.ui.fake_engine import FakeEngine
from app.ui import main as ui_main, window as ui_window

app = ui_main.make_app()
real, seen = ui_window.MainWindow, {}

def make(*a, **kw):
    seen["w"] = real(*a, engine_factory=FakeEngine, **kw)
    return seen["w"]

ui_window.MainWindow = make

def check():
    w = seen.get("w")
    if w is not None and (w.model_info is not None or w.errors):
        print("loaded", (w.model_info or {}).get("architecture"), w.errors, flush=True)
        w.close()
    else:
        QTimer.singleShot(50, check)

QTimer.singleShot(50, check)
QTimer.singleShot(60000, lambda: QApplication.instance().quit())
sys.exit(ui_main.run_window(argparse.Namespace(file=sys.argv[1], starter=False)))
"""


def test_run_window_opens_the_file_given_on_the_command_line(smollm2_path, tmp_path):
    """`llambda FILE.gguf`: run_window(args) opens the window on the file, and returns 0 when
    the window is closed (a separate process: it runs the application's own event loop)."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=root)
    r = subprocess.run(
        [sys.executable, "-c", RUN_WINDOW, str(smollm2_path)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "loaded llama []" in r.stdout


def test_titles_and_model_names_never_become_html(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path)
    send(qtbot, w, "<img src=x onerror=alert(1)> <b>bold?</b>")
    item = w.conversations.list.item(0)
    assert item.text().startswith("<img src=x")
    assert "&lt;img src=x" in item.toolTip() and "<img" not in item.toolTip()
    assert w.windowTitle().startswith("<img src=x")
    w.info_panel.show_info({"name": "<b>evil</b>", "path": "/x/<i>.gguf"})
    assert w.info_panel.values["Model"].textFormat() == Qt.PlainText
    assert "&lt;b&gt;evil" in w.info_panel.values["Model"].toolTip()


def test_reference_kernels_are_announced(qtbot, make_window, smollm2_path):
    class RefEngine(FakeEngine):
        def load(self, *a):
            return {**super().load(*a), "isa": "ref"}

    w, _ = loaded(qtbot, make_window, smollm2_path, RefEngine())
    assert "no AVX2" in w.notice.text() and w.notice.isVisible()


def test_switching_conversations_while_a_reply_streams(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path, FakeEngine(delay=0.0))
    send(qtbot, w, "older chat")
    older = w.state.current_id
    w.on_conversations_new_requested()
    engine.delay = 0.01
    w.input.setPlainText("streaming chat")
    w.send()
    streaming = w.state.current_id
    qtbot.waitUntil(lambda: len(w.state.reply.text) > 5, timeout=10000)
    w.conversations.list.setCurrentItem(w.conversations.item_for(older))
    assert [m.text for m in w.chat.messages] == ["older chat", engine.reply] and w.chat.streaming is None
    qtbot.wait(100)
    assert [m.text for m in w.chat.messages] == ["older chat", engine.reply]
    w.conversations.list.setCurrentItem(w.conversations.item_for(streaming))
    assert w.generating and w.chat.streaming is not None
    qtbot.waitUntil(lambda: not w.generating, timeout=20000)
    assert w.chat.messages[-1].text == engine.reply and w.chat.messages[-1].status == "complete"


def test_escape_cancels_an_edit(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path)
    send(qtbot, w, "keep me")
    w.chat.messages[0].edit_button.click()
    assert w.edit_banner.isVisible() and w.input.toPlainText() == "keep me"
    qtbot.keyClick(w, Qt.Key_Escape)
    assert not w.edit_banner.isVisible() and w.input.toPlainText() == "" and w.editing_id is None
    assert [m.content for m in w.state.messages()] == ["keep me", engine.reply]


def test_stop_before_the_worker_starts_the_reply(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, smollm2_path)
    w.worker.cancel(w.state._next_request)  # the next request is stopped before it starts
    send(qtbot, w, "never mind")
    last = w.state.messages()[-1]
    assert last.status == "interrupted" and last.content == "" and not engine.calls
    send(qtbot, w, "now answer")
    assert w.state.messages()[-1].content == engine.reply


def test_ctrl_o_opens_a_file_chosen_in_the_dialog(qtbot, make_window, smollm2_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    asked = []

    def choose(parent, caption, folder, filters):
        asked.append(filters)
        return str(smollm2_path), filters

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(choose))
    w = make_window(FakeEngine)
    qtbot.keyClick(w, Qt.Key_O, Qt.ControlModifier)
    assert asked, "Ctrl+O did not ask for a file"
    qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=20000)
    assert not w.errors, w.errors
    assert "*.gguf" in asked[0] and w.model_picker.count() == 2


def test_stats_bar_refreshes_at_least_twice_a_second_when_idle(qtbot, make_window):
    w = make_window(FakeEngine)
    start = w.stats.updates
    qtbot.wait(1100)
    assert w.stats.updates - start >= 2
    assert "RAM" in w.stats.text() and "MB" in w.stats.labels["mem"].text()


def test_dark_palette_means_dark_theme():
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QApplication

    from app.ui.theme import system_is_dark

    app = QApplication.instance()
    saved = app.palette()
    try:
        dark = QPalette(saved)
        dark.setColor(QPalette.Window, QColor("#202124"))
        app.setPalette(dark)
        scheme = app.styleHints().colorScheme()
        if scheme == Qt.ColorScheme.Unknown:
            assert system_is_dark(app)
        light = QPalette(saved)
        light.setColor(QPalette.Window, QColor("#f5f5f5"))
        app.setPalette(light)
        if scheme == Qt.ColorScheme.Unknown:
            assert not system_is_dark(app)
    finally:
        app.setPalette(saved)


def test_a_long_conversation_opens_on_its_last_messages(qtbot, make_window):
    from app.ui.chat_view import SHOW_LAST

    w = make_window(FakeEngine)
    conv = w.state.new_conversation()
    for i in range(60):
        w.state.store.add_message(conv, "user" if i % 2 == 0 else "assistant", f"message {i}")
    w.show_current()
    assert len(w.chat.messages) == SHOW_LAST and w.chat.messages[-1].text == "message 59"
    more = w.chat.findChild(type(w.send_button), "earlierButton")
    assert more is not None and "20 earlier" in more.text()
    more.click()
    assert len(w.chat.messages) == 60 and w.chat.messages[0].text == "message 0"


def test_macos_file_open_event_opens_the_model(qtbot, make_window, smollm2_path):
    """Finder hands a double-clicked file to a running app as a FileOpen event."""
    from PySide6.QtGui import QFileOpenEvent
    from PySide6.QtWidgets import QApplication

    from app.ui.main import FileOpenForwarder

    engine = FakeEngine()
    w = make_window(lambda: engine)
    forwarder = FileOpenForwarder(w)
    QApplication.instance().installEventFilter(forwarder)
    try:
        QApplication.sendEvent(QApplication.instance(), QFileOpenEvent(str(smollm2_path)))
        qtbot.waitUntil(lambda: w.model_info is not None, timeout=20000)
        assert w.model_info["architecture"] == "llama" and not w.errors
    finally:
        QApplication.instance().removeEventFilter(forwarder)


def test_a_growing_reply_remeasures_only_what_changed(qtbot, make_window):
    """Streaming into a long reply: each update re-measures the paragraph that grew, not the ones
    above it (an uncached QLabel made a 60-paragraph reply cost 20-25 ms per update). And a cached
    measurement never outlives the text or font it was taken for."""
    from PySide6.QtGui import QFont
    from PySide6.QtWidgets import QApplication

    from app.ui.chat_view import WrappedLabel

    w = make_window()
    w.resize(900, 700)
    w.show()
    qtbot.waitExposed(w)
    chat = w.chat

    def measurements_per_update(n_paragraphs: int, request: int) -> float:
        chat.begin_reply(request)
        text = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 12 for i in range(n_paragraphs))
        chat.streaming.set_text(text)
        QApplication.processEvents()
        before = WrappedLabel.measurements
        for k in range(5):
            chat.streaming.set_text(text + " more" * (k + 1))
            QApplication.processEvents()
        assert len(chat.streaming.parts) == n_paragraphs
        return (WrappedLabel.measurements - before) / 5

    few, many = measurements_per_update(10, 1), measurements_per_update(60, 2)
    # a handful for the paragraph that grew, whatever is above it; uncached: ~64 and ~230
    assert few < 30 and many < 30, (few, many)

    label = chat.streaming.parts[-1]
    width = label.width()
    one_line = label.heightForWidth(width)
    label.setText(label.text() + " ipsum" * 200)
    assert label.heightForWidth(width) > one_line
    grown = label.heightForWidth(width)
    big = QFont(label.font())
    big.setPointSizeF(big.pointSizeF() * 2)
    label.setFont(big)
    assert label.heightForWidth(width) > grown
