"""The worker saves the conversation's KV state in its own thread after a reply has finished (the
window is told first) and again when the window closes; the real adapter then restores it."""
from __future__ import annotations

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
    worker.generation_finished.connect(lambda rid, stats: order.append(f"finished {len(engine.saves)}"))
    worker.on_window_generate_requested(1, [{"role": "user", "content": "hi"}], {})
    assert order == ["finished 0"] and engine.saves == ["saved"]     # saved after the window knew
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
    stats = [e for e in again.generate(history, {"temperature": 0, "max_tokens": 4})][-1]["stats"]
    again.close()
    assert done["type"] == "done"
    # the history up to the first reply's tokens came from the saved state
    assert stats["prompt_evaluated"] < stats["prompt_tokens"] - 10
