"""The real window driving the real engine on SmolLM2-135M (Q4_1): drop the file, chat, stop,
regenerate, edit, switch conversations, restart and find the history, and the UI thread never
stalls. Replies are short (greedy, a few dozen tokens) to keep the suite fast on two cores.
"""

from __future__ import annotations

import time

import statistics

import pytest
from PySide6.QtCore import Qt

from tests.ui.conftest import drop_file, least_stall, on_ui_thread, track_phases

FAST = {"temperature": 0.0, "max_tokens": 24, "seed": 1}


def real_window(qtbot, make_window, path, **sampling):
    w = make_window()  # default factory: the real engine
    w.state.put("sampling_defaults", {**FAST, **sampling})
    assert drop_file(w.chat.viewport(), path)
    qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=60000)
    assert not w.errors, w.errors
    return w


def send(qtbot, w, text, timeout=60000):
    w.input.setPlainText(text)
    qtbot.keyClick(w.input, Qt.Key_Return)
    qtbot.waitUntil(lambda: not w.generating, timeout=timeout)


def test_chat_with_smollm2(qtbot, make_window, smollm2_path):
    w = real_window(qtbot, make_window, smollm2_path)
    assert w.info_panel.values["Architecture"].text() == "llama"
    assert w.info_panel.values["Chat template"].text() == "ok"
    # the automatic context: SmolLM2's training length (8192), which fits; the panel says why
    assert w.stats.figures["pool_size"] >= 1 and w.stats.figures["n_ctx"] == 8192
    assert "training length" in w.model_info["n_ctx_reason"]
    assert w.info_panel.values["Context"].text().startswith("8192 in use: the")

    # send, and watch the reply stream in batches
    shown = []
    on_ui_thread(
        w.worker.token_generated, lambda rid, pieces: shown.append(len(w.state.reply.text) if w.state.reply else 0), w
    )
    send(qtbot, w, "What is the capital of France?")
    reply = w.state.messages()[-1]
    assert reply.role == "assistant" and reply.status == "complete" and reply.content.strip()
    assert reply.completion_tokens == 24 or reply.timings.get("stop_reason") == "eog"
    assert len(shown) >= 2 and shown == sorted(shown)
    assert w.chat.messages[-1].text == reply.content
    text = w.stats.text()
    assert "gen – " not in text and "first token –" not in text and "context 0/" not in text
    first_reply = reply.content

    # stop in the middle of a long reply (a conversation keeps the settings it was created with:
    # this one's own max_tokens is raised, or the reply would be over in 24 tokens, ~70 ms)
    w.state.store.update_conversation(w.state.current_id, sampling={**FAST, "max_tokens": 400})
    w.input.setPlainText("Tell me a long story about a dragon.")
    w.send()
    qtbot.waitUntil(
        lambda: not w.generating or (w.state.reply is not None and len(w.state.reply.text) > 20), timeout=60000
    )
    last = w.state.messages()[-1]
    assert w.generating, (
        "the long reply ended before it could be stopped",
        w.errors,
        last.status,
        last.completion_tokens,
        last.timings.get("stop_reason"),
    )
    qtbot.keyClick(w, Qt.Key_Escape)
    qtbot.waitUntil(lambda: not w.generating, timeout=10000)
    stopped = w.state.messages()[-1]
    assert stopped.status == "interrupted" and stopped.timings.get("stop_reason") == "cancelled"
    assert 0 < (stopped.completion_tokens or 0) < 400

    # regenerate: greedy, so the same prompt gives the same reply again
    w.state.store.update_conversation(w.state.current_id, sampling=FAST)
    w.input.setPlainText("What is the capital of France?")
    w.on_chat_edit_requested(w.state.messages()[-2].id)  # edit the dragon question
    w.input.setPlainText("What is the capital of France?")
    w.send()
    qtbot.waitUntil(lambda: not w.generating, timeout=60000)
    msgs = w.state.messages()
    assert [m.role for m in msgs] == ["user", "assistant"] * 2 and msgs[2].content == msgs[0].content
    edited = msgs[3].content
    w.regenerate()
    qtbot.waitUntil(lambda: not w.generating, timeout=60000)
    assert w.state.messages()[-1].content == edited and len(w.state.messages()) == 4

    # a second conversation, then back to the first
    first = w.state.current_id
    qtbot.keyClick(w, Qt.Key_N, Qt.ControlModifier)
    send(qtbot, w, "Say hello.")
    second = w.state.current_id
    w.conversations.list.setCurrentItem(w.conversations.item_for(first))
    assert w.chat.messages[1].text == first_reply
    w.close()

    # restart: the history is there, and the last model loads again
    w2 = make_window()
    assert w2.conversations.list.count() == 2
    w2.conversations.list.setCurrentItem(w2.conversations.item_for(second))
    assert w2.chat.messages[0].text == "Say hello." and w2.chat.messages[1].status_label.text() == ""
    assert w2.load_last_used()
    qtbot.waitUntil(lambda: w2.model_info is not None, timeout=60000)
    send(qtbot, w2, "And in French?")
    assert w2.state.messages()[-1].status == "complete" and w2.state.messages()[-1].content


def stall_run(qtbot, make_window, path):
    def run(probe):
        w = make_window()
        w.state.put("sampling_defaults", {**FAST, "max_tokens": 32})
        track_phases(w, probe)
        probe.phase = "import"
        probe.start()
        assert drop_file(w, path)
        qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=60000)
        send(qtbot, w, "Write a haiku about the sea.")
        probe.stop()
        w.close()

    return run


def test_no_stall_during_import_and_generation(qtbot, make_window, smollm2_path):
    """A 5 ms timer on the UI thread through the pre-flight, the 98 MB import and a reply: no gap
    reaches 50 ms (see least_stall for the retry on a shared machine)."""
    assert least_stall(stall_run(qtbot, make_window, smollm2_path), phases=("import", "generate", "ready")) < 50


def _tokenizer_gil_hold_ms(path) -> float:
    """The longest gap a 2 ms ticker thread sees while `tokenizers` builds the model's BPE tables
    (one call that holds the interpreter lock: ~20-30 ms on a Zen 5 core, ~90-110 ms on a Zen 3
    one), best of three."""
    import threading

    from app.gguf import open_gguf
    from app.text import load_tokenizer

    best = float("inf")
    for _ in range(3):
        stop, gaps = threading.Event(), [0.0]

        def tick():
            last = time.perf_counter()
            while not stop.is_set():
                time.sleep(0.002)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        t = threading.Thread(target=tick)
        t.start()
        with open_gguf(path) as f:
            load_tokenizer(f)
        stop.set()
        t.join()
        best = min(best, 1000 * max(gaps))
    return best


def test_no_stall_during_load(qtbot, make_window, smollm2_path):
    """Loading holds the GIL longest while `tokenizers` builds the BPE tables, in one call we
    cannot split; nothing else in a load may stall the window: under 50 ms, or under that call's
    own hold on this CPU (measured here, in the same process) plus 25 ms."""
    allowed = max(50.0, _tokenizer_gil_hold_ms(smollm2_path) + 25.0)
    assert least_stall(stall_run(qtbot, make_window, smollm2_path), phases=("load",)) < allowed


@pytest.mark.slow
def test_window_generation_speed_matches_the_engine(qtbot, make_window, smollm2_path):
    """Tokens/s seen through the window vs `llambda bench` (tg, decode only) at the same depth --
    the window's reply starts after its prompt's tokens, so bench runs with --depth equal to the
    prompt length -- and vs the same engine driven directly (generate). Runs alternate in one
    process at the same thread count; the medians of the paired ratios must be within 5%."""
    from app.engine.cli import bench
    from app.ui.engine_adapter import RealEngine

    n = 256
    w = real_window(qtbot, make_window, smollm2_path, max_tokens=n)
    threads = w.model_info.get("pool_size", 0)
    direct_engine = RealEngine()
    direct_engine.load(str(smollm2_path), 2048, threads, lambda f: None)
    window_rates, direct_rates, bench_rates = [], [], []
    prompt = "Write a long story about a dragon who learns to bake bread."
    for i in range(5):
        qtbot.keyClick(w, Qt.Key_N, Qt.ControlModifier)
        # one event loop until the reply is done (waitUntil's 10 ms polling would run Python in
        # the UI thread throughout and be measured as the window's cost)
        w.input.setPlainText(prompt)
        with qtbot.waitSignal(w.worker.generation_finished, timeout=60000):
            qtbot.keyClick(w.input, Qt.Key_Return)
        qtbot.waitUntil(lambda: not w.generating, timeout=5000)
        reply = w.state.messages()[-1]
        assert reply.completion_tokens > 128
        window_rates.append(reply.timings["gen_tok_s"])
        direct_engine.engine.session.reset()
        done = list(direct_engine.generate([{"role": "user", "content": prompt}], {**FAST, "max_tokens": n}))[-1]
        direct_rates.append(round(done.stats.generation_tok_s, 2))
        depth = reply.prompt_tokens
        bench_rates.append(
            bench(str(smollm2_path), threads=(threads,), pp=(8,), tg=(reply.completion_tokens,), reps=1, depth=depth)[
                -1
            ]["tok_s"]
        )
    direct_engine.close()
    ratio = statistics.median(a / b for a, b in zip(window_rates, direct_rates))
    vs_bench = statistics.median(a / b for a, b in zip(window_rates, bench_rates))
    print(
        f"\nwindow {window_rates} tok/s\ndirect {direct_rates} tok/s\nbench  {bench_rates} tok/s "
        f"(depth {depth})\nwindow/direct {ratio:.3f}, window/bench {vs_bench:.3f}"
    )
    assert vs_bench > 0.95 and ratio > 0.95


def test_context_shift_is_marked_in_the_chat(qtbot, make_window, smollm2_path):
    """A 128-token context with the shift policy: a long reply drops old tokens and goes on; the
    chat shows where, and the figures show the kernel threads at work."""
    w = make_window()
    w.state.put("engine", {"n_ctx": 128, "threads": 0, "overflow": "shift"})
    w.state.put("sampling_defaults", {**FAST, "max_tokens": 160})
    seen = []
    w.worker.stats_updated.connect(lambda d: seen.append(d))
    assert drop_file(w, smollm2_path)
    qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=60000)
    assert w.model_info["n_ctx"] == 128 and not w.errors
    send(qtbot, w, "Tell me a long story about a dragon.")
    reply = w.state.messages()[-1]
    assert reply.status == "complete" and reply.completion_tokens > 100
    assert reply.timings["context_shifts"] >= 1
    markers = [m for m in w.chat.findChildren(type(w.chat.empty), "shiftMarker") if m.isVisibleTo(w)]
    assert markers and "dropped" in markers[0].text()
    assert any(d.get("threads_busy", 0) > 0 for d in seen)
    assert all(d.get("n_ctx_used", 0) <= 128 for d in seen)
