"""The worker saves the conversation's KV state in its own thread after a reply has finished (the
window is told first) and again when the window closes; the real adapter then restores it."""

from __future__ import annotations

import numpy as np

from app.engine.generate import Finished, TextPiece
from app.ui.state import reply_timings
from app.ui.worker import EngineWorker
from tests.ui.fake_engine import FakeEngine


class SavingEngine(FakeEngine):
    def __init__(self):
        super().__init__(reply="one two three", delay=0.0)
        self.saves: list[str] = []

    def save_state(self):
        self.saves.append("saved")
        return True


def test_the_worker_saves_after_the_reply_is_finished_and_on_close(qtbot):
    engine = SavingEngine()
    worker = EngineWorker(engine_factory=lambda: engine)
    worker._engine, worker.loaded_path = engine, "model.gguf"
    order: list[str] = []
    worker.generation_finished.connect(lambda rid, fin, figures: order.append(f"finished {len(engine.saves)}"))
    worker.on_window_generate_requested(1, [{"role": "user", "content": "hi"}], {})
    assert order == ["finished 0"] and engine.saves == ["saved"]  # saved after the window knew
    worker.on_window_closing()
    assert engine.saves == ["saved", "saved"]


def test_the_real_adapter_restores_a_saved_conversation(smollm2_path):
    from app.paths import cache_dir
    from app.ui.engine_adapter import RealEngine

    history = [{"role": "user", "content": "Say hello in French."}]
    first = RealEngine()
    first.load(str(smollm2_path), 256, 2, lambda f: None)
    done = [e for e in first.generate(history, {"temperature": 0, "max_tokens": 6})][-1]
    assert first.save_state()
    first.close()
    assert [p.suffix for p in (cache_dir() / "kv").iterdir()] == [".llkv"]
    history += [{"role": "assistant", "content": "Bonjour"}, {"role": "user", "content": "And in German?"}]
    again = RealEngine()
    again.load(str(smollm2_path), 256, 2, lambda f: None)
    stats = [e for e in again.generate(history, {"temperature": 0, "max_tokens": 4})][-1].stats
    again.close()
    assert isinstance(done, Finished)
    # the history up to the first reply's tokens came from the saved state
    assert stats.prompt_tokens_evaluated < stats.prompt_tokens - 10


SETTINGS = {"temperature": 0, "max_tokens": 6}
FIRST = [{"role": "user", "content": "Say hello in French."}]


def _loaded(smollm2_path, n_ctx=256):
    from app.ui.engine_adapter import RealEngine

    eng = RealEngine()
    eng.load(str(smollm2_path), n_ctx, 2, lambda f: None)
    return eng


def _reply(worker, request_id, history):
    got = {}
    worker.generation_finished.connect(lambda rid, fin, figures: got.setdefault(rid, reply_timings(fin, figures)))
    worker.on_window_generate_requested(request_id, history, dict(SETTINGS))
    return got[request_id]


def test_a_reply_right_after_a_long_save_is_not_delayed_by_it(qtbot, smollm2_path, tmp_path):
    """The first reply's state is being written by a writer that does not finish until the test
    lets it; the next two replies are answered meanwhile (the third replaces the second's pending
    state), and the file written at close restores the third's cache bit for bit."""
    from app.engine.kvstore import KVStore
    from tests.engine.test_kvkeeper import SlowStore

    eng = _loaded(smollm2_path)
    slow = eng.kv.store = SlowStore(tmp_path / "kv")
    worker = EngineWorker(engine_factory=lambda: eng)
    worker._engine, worker.loaded_path = eng, str(smollm2_path)
    history = list(FIRST)
    first = _reply(worker, 1, history)
    assert slow.started.wait(30)  # its state is being written, and held there
    for rid, text in ((2, "And in German?"), (3, "And in Spanish?")):
        history += [{"role": "assistant", "content": "Bonjour"}, {"role": "user", "content": text}]
        stats = _reply(worker, rid, history)
        assert stats["completion_tokens"] > 0 and not stats.get("stopped")
        assert slow.writes == []  # answered while the first write was still held
        assert stats["prompt_evaluated"] < stats["prompt_tokens"]  # the cache was reused
    assert first["completion_tokens"] > 0
    session = eng.engine.session
    tokens = list(session.tokens)
    want = eng.engine.decoder.kv_read(len(tokens))
    key = eng._chat.state_key
    assert eng.kv.superseded == 1  # reply 2's state gave way to reply 3's
    slow.release.set()
    worker.on_window_closing()  # waits for the writes
    assert [n for _, n in slow.writes] == [slow.writes[0][1], len(tokens)]
    from app.engine.engine import Engine

    with Engine(smollm2_path, n_ctx=256, n_threads=2, kv_store=KVStore(tmp_path / "kv")) as again:
        assert again.restore_state(key, tokens + [42]) == len(tokens)
        assert again.session.tokens == tokens
        np.testing.assert_array_equal(again.decoder.kv_read(len(tokens)), want)


def test_switching_conversations_restores_from_memory_while_they_fit(smollm2_path, tmp_path):
    """Two conversations answered in turn on one adapter, as the window does when the user
    switches between them: with room in memory for both states, each comes back from memory;
    with room for one, the other comes from the disk store. Either way only the new message is
    decoded, and the replies are those of a cold start."""
    from tests.engine.test_kvkeeper import SlowStore

    first = {
        "a": [{"role": "user", "content": "Name a red fruit."}],
        "b": [{"role": "user", "content": "Name a blue bird."}],
    }
    follow_ups = {}
    for room, disk_reads, memory_hits in (("two", 0, 2), ("one", 2, 0)):
        eng = _loaded(smollm2_path)
        store = eng.kv.store = SlowStore(tmp_path / room)
        store.release.set()  # no waiting here
        replies = {}
        for name in "ab":
            replies[name] = "".join(e.text for e in eng.generate(first[name], SETTINGS) if isinstance(e, TextPiece))
            eng.save_state()
            if room == "one" and name == "a":  # memory for one state (b's evicts a's)
                eng.kv.ram_budget_bytes = eng.kv.memory_bytes() * 3 // 2
        assert eng.kv.flush(30)
        for name in "ab":  # switch to a, then back to b
            history = first[name] + [
                {"role": "assistant", "content": replies[name]},
                {"role": "user", "content": "Why?"},
            ]
            events = list(eng.generate(history, SETTINGS))
            stats = events[-1].stats
            assert stats.prompt_tokens_evaluated < stats.prompt_tokens - 10, (room, name)
            text = "".join(e.text for e in events if isinstance(e, TextPiece))
            assert follow_ups.setdefault(name, (history, text)) == (history, text), (room, name)
            eng.save_state()
            assert eng.kv.flush(30)
        assert (store.loads, eng.kv.memory_hits) == (disk_reads, memory_hits), room
        eng.close()
    cold = _loaded(smollm2_path)
    cold.kv.set_budget(0)  # nothing kept, nothing restored
    cold.kv.ram_budget_bytes = 0
    for name, (history, text) in follow_ups.items():
        cold.engine.session.reset()
        events = list(cold.generate(history, SETTINGS))
        assert events[-1].stats.prompt_tokens_evaluated == events[-1].stats.prompt_tokens
        assert "".join(e.text for e in events if isinstance(e, TextPiece)) == text, name
    cold.close()


class BudgetEngine(SavingEngine):
    def __init__(self):
        super().__init__()
        self.budgets: list[int] = []

    def set_kv_budget(self, budget_bytes):
        self.budgets.append(budget_bytes)


def test_the_window_sends_the_budget_setting_and_saves_on_a_switch(qtbot, make_window, smollm2_path):
    from PySide6.QtCore import Qt

    from app import defaults as D
    from tests.ui.test_window_fake import loaded, send

    w, engine = loaded(qtbot, make_window, smollm2_path, BudgetEngine())
    assert engine.budgets == [D.KV_BUDGET_MB << 20]  # at load: the setting (default 2 GiB)
    send(qtbot, w, "apples are red")
    first = w.state.current_id
    qtbot.keyClick(w, Qt.Key_N, Qt.ControlModifier)
    send(qtbot, w, "bananas are yellow")
    qtbot.waitUntil(lambda: len(engine.saves) == 2, timeout=5000)
    w.conversations.list.setCurrentItem(w.conversations.item_for(first))
    qtbot.waitUntil(lambda: len(engine.saves) == 3, timeout=5000)  # the switch keeps the state
    dlg = w.open_settings()
    assert dlg.kv_budget.value() == D.KV_BUDGET_MB
    dlg.kv_budget.setValue(300)
    dlg.accept()
    qtbot.waitUntil(lambda: engine.budgets[-1:] == [300 << 20], timeout=5000)
    assert w.state.engine_settings()["kv_budget_mb"] == 300 and not w.model_busy  # no reload
    dlg = w.open_settings()
    dlg.accept()  # unchanged: not sent again
    qtbot.wait(100)
    assert engine.budgets == [D.KV_BUDGET_MB << 20, 300 << 20]


def test_the_adapter_honours_the_budget_before_and_after_a_load(smollm2_path, tmp_path):
    from app.ui.engine_adapter import RealEngine

    eng = RealEngine()
    eng.set_kv_budget(123 << 20)
    eng.load(str(smollm2_path), 256, 2, lambda f: None)
    assert eng.kv.store.budget_bytes == 123 << 20 and eng.engine.kv_store is eng.kv
    [e for e in eng.generate(FIRST, SETTINGS)]
    assert eng.save_state() and eng.kv.flush(30)
    assert list(eng.kv.store.folder.glob("*.llkv"))
    eng.set_kv_budget(0)  # off: the saved states go at once
    assert not list(eng.kv.store.folder.glob("*.llkv"))
    eng.close()


def test_the_real_window_switches_between_two_conversations_from_memory(qtbot, make_window, smollm2_path):
    """In the window with the real engine: conversation a, then b, then back to a and to b; each
    follow-up is restored from the states kept in memory (no disk read) and decodes only its new
    message."""
    from PySide6.QtCore import Qt

    from tests.ui.test_window_real import real_window, send

    w = real_window(qtbot, make_window, smollm2_path, max_tokens=8)
    send(qtbot, w, "Name a red fruit.")
    a = w.state.current_id
    qtbot.keyClick(w, Qt.Key_N, Qt.ControlModifier)
    send(qtbot, w, "Name a blue bird.")
    b = w.state.current_id
    keeper = w.worker._engine.kv  # read while the worker is idle
    disk_loads = []
    load = keeper.store.load
    keeper.store.load = lambda *args: disk_loads.append(args[1]) or load(*args)
    for conv in (a, b):
        w.conversations.list.setCurrentItem(w.conversations.item_for(conv))
        assert w.state.current_id == conv
        send(qtbot, w, "Why?")
        reply = w.state.messages()[-1]
        assert reply.status == "complete", reply.timings
        t = reply.timings
        assert t["prompt_evaluated"] < reply.prompt_tokens - 10 and t["prompt_reused"] > 10, (conv, t)
    assert keeper.memory_hits == 2 and disk_loads == []


def test_a_cache_that_moved_on_is_not_saved_under_the_last_conversation(smollm2_path):
    """After the window's reply, a request of the local server ran on the same cache: a save on a
    switch or at close then keeps the reply's state instead of filing the server's tokens under
    that conversation."""
    eng = _loaded(smollm2_path)
    [e for e in eng.generate(FIRST, SETTINGS)]
    assert eng.save_state() and eng.kv.flush(30)
    key, model = eng._chat.state_key, eng.engine.model_id
    saved = eng.kv.peek(model, key, eng.engine.decoder.kv_signature(), 256)
    assert saved == eng.engine.session.tokens
    eng.engine.session.feed(eng.engine.chat_prompt([{"role": "user", "content": "Another program asks."}]))
    assert eng.save_state() is False
    assert eng.kv.peek(model, key, eng.engine.decoder.kv_signature(), 256) == saved
    eng.close()


def test_a_continued_reply_is_saved_under_its_own_conversation(smollm2_path):
    from app.engine.engine import conversation_key

    eng = _loaded(smollm2_path)
    other = [{"role": "user", "content": "Name a blue bird."}]
    first = [e for e in eng.generate(FIRST, SETTINGS)]
    text = "".join(e.text for e in first if isinstance(e, TextPiece))
    [e for e in eng.generate(other, SETTINGS)]  # the last conversation answered
    [e for e in eng.generate(FIRST + [{"role": "assistant", "content": text}], {**SETTINGS, "continue": True})]
    assert eng.save_state() and eng.kv.flush(30)
    sig = eng.engine.decoder.kv_signature()
    model = eng.engine.model_id
    assert eng.kv.peek(model, conversation_key(None, FIRST[0]["content"]), sig, 256) == eng.engine.session.tokens
    assert eng.kv.peek(model, conversation_key(None, other[0]["content"]), sig, 256) is None  # not saved there
    eng.close()
