"""Speculation figures in the window: the engine adapter reports them, the stats bar shows them."""

from __future__ import annotations

from app.ui.engine_adapter import RealEngine


def test_adapter_reports_speculation_and_stats_bar_shows_it(qtbot, smollm2_path):
    from app.ui.stats_bar import StatsBar

    eng = RealEngine()
    eng.load(str(smollm2_path), 512, 1, lambda f: None)
    try:
        assert eng.speculation()["spec_kind"] == "lookup"  # on by default
        msgs = [{"role": "user", "content": "Repeat: one two three, one two three, one two three."}]
        done = list(eng.generate(msgs, {"temperature": 0, "max_tokens": 24}))[-1]
        assert done.stats.spec is not None and done.stats.spec.kind == "lookup"
        figures = eng.speculation()  # what the worker's live figures carry to the window
        assert figures["spec_kind"] == "lookup" and "spec_tokens_per_pass" in figures
    finally:
        eng.close()
    bar = StatsBar()
    qtbot.addWidget(bar)
    bar.on_worker_stats_updated(
        {"gen_tok_s": 40.0, "spec_passes": 3, "spec_tokens_per_pass": 3.5, "spec_acceptance": 0.9, "spec_speedup": 1.6}
    )
    assert "3.5 tok/pass" in bar.labels["gen"].text() and "×1.60" in bar.labels["gen"].text()
    bar.on_worker_stats_updated({"spec_passes": 0})
    assert "tok/pass" not in bar.labels["gen"].text()
