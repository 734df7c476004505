"""The soak (issue #22, item 1), behind `slow`: long use of one engine and of the window, on the
real SmolLM2 test model, and nothing grows.

- 1,000 generations on one engine: mixed lengths, cancels (from another thread and by dropping
  the stream), context shifts, regenerate, seed changes, new conversations;
- 50 load/unload cycles alternating SmolLM2 and a tiny synthetic model;
- a few hundred turns through the window (pytest-qt, the real engine on its worker thread).

Held: RSS after warm-up grows less than 5%; open file descriptors and threads come back to their
baseline; no mapping of a model file is left (/proc/self/maps); Python's object count stable.
Each test prints its figures (docs/RELIABILITY.md has the last run's).
"""

from __future__ import annotations

import collections
import gc
import os
import random
import sys
import threading
import time

import pytest

from app.engine import Engine
from app.engine.engine import Chat
from app.engine.generate import ContextShifted, Finished, GenerationRequest, TextPiece
from app.engine.sampler import SamplerSettings
from tests.synth import write_tiny_model

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")]

RSS_GROWTH = 0.05
N_GENERATIONS = 1000
WARM_UP = 100
N_CYCLES = 50
N_WINDOW_TURNS = 300
PROMPTS = [
    "Hi!",
    "What is 2 + 2?",
    "Name three colours.",
    "Write a haiku about the sea.",
    "Explain what a CPU does, in one sentence.",
    "Tell me a long story about a dragon " * 8,
    "List the days of the week.",
    "Translate 'good morning' into French.",
]


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def native_threads() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def mappings_of(*paths) -> list[str]:
    names = {os.path.realpath(p) for p in paths}
    with open("/proc/self/maps") as f:
        return [line.strip() for line in f if line.split()[-1] in names]


def settle() -> None:
    gc.collect()
    time.sleep(0.3)  # pool threads that were told to stop have ended


def snapshot() -> dict:
    settle()
    return {
        "rss": rss(),
        "fds": fds(),
        "threads": native_threads(),
        "py_threads": threading.active_count(),
        "objects": len(gc.get_objects()),
    }


def type_counts() -> collections.Counter:
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


def warm_process(*paths) -> None:
    """Load, use and close each model once: the first tokenization starts the tokenizer
    library's thread pool (one thread per core) and the first load maps numpy's, for the rest
    of the process. The baselines are taken after this."""
    for path in paths:
        with Engine(path, n_ctx=256) as engine:
            ids = engine.chat_prompt([{"role": "user", "content": "Hello"}])
            for _ in engine.generate(GenerationRequest(tuple(ids), max_tokens=2)):
                pass


def turn(engine, chat: Chat, rng: random.Random, i: int, counts: dict) -> None:
    """One generation of a mixed session."""
    kind = rng.random()
    sampler = SamplerSettings(
        temperature=rng.choice((0.0, 0.7, 1.0)), seed=rng.randrange(1 << 31), top_k=rng.choice((0, 40))
    )
    max_tokens = rng.choice((1, 2, 4, 8, 8, 16, 16, 32))
    if kind < 0.08 and chat.messages:  # regenerate the last reply
        user = chat.messages[-2]["content"] if len(chat.messages) >= 2 else rng.choice(PROMPTS)
        del chat.messages[-2:]
        counts["regenerate"] += 1
    else:
        user = rng.choice(PROMPTS) + f" ({i})"
    events = chat.send(user, sampler, max_tokens=max_tokens)
    cancel_at = rng.randrange(1, 6) if kind > 0.9 else None
    timer = None
    if 0.85 < kind <= 0.9:  # cancelled from another thread, as the window does
        timer = threading.Timer(rng.uniform(0.0, 0.05), engine.cancel)
        timer.start()
        counts["cancel_thread"] += 1
    pieces = 0
    for ev in events:
        if isinstance(ev, ContextShifted):
            counts["shift"] += 1
        elif isinstance(ev, TextPiece):
            pieces += 1
            if cancel_at is not None and pieces >= cancel_at:
                events.close()  # the reader goes away mid-stream
                counts["dropped_stream"] += 1
                chat.messages.pop()  # the user turn without its reply
                break
        elif isinstance(ev, Finished):
            counts["tokens"] += len(ev.ids)
    if timer is not None:
        timer.join()
    counts["generations"] += 1


def test_1000_generations_on_one_engine(smollm2_path):
    warm_process(smollm2_path)
    before = snapshot()
    rng = random.Random(22)
    counts = dict.fromkeys(
        ("generations", "tokens", "shift", "regenerate", "cancel_thread", "dropped_stream", "new_chat"), 0
    )
    t0 = time.monotonic()
    engine = Engine(smollm2_path, n_ctx=384)
    chat = Chat(engine, system="You are a helpful assistant.")
    base = None
    rss_at = []
    for i in range(N_GENERATIONS):
        if i and i % 150 == 0:  # a new conversation now and then
            chat = Chat(engine, system=rng.choice((None, "You are terse.")))
            counts["new_chat"] += 1
        turn(engine, chat, rng, i, counts)
        if i + 1 == WARM_UP:
            base = snapshot()
        if (i + 1) % 100 == 0:
            gc.collect()
            rss_at.append(rss())
    end = snapshot()
    engine.close()
    del engine, chat
    after = snapshot()
    growth = end["rss"] / base["rss"] - 1
    print(
        f"\nsoak engine: {counts}, {time.monotonic() - t0:.0f} s; RSS before {before['rss'] >> 20} MB, "
        f"after warm-up {base['rss'] >> 20} MB, at the end {end['rss'] >> 20} MB ({100 * growth:+.2f}%), "
        f"after close {after['rss'] >> 20} MB; every 100: {[r >> 20 for r in rss_at]} MB; "
        f"fds {before['fds']}/{base['fds']}/{end['fds']}/{after['fds']}, "
        f"threads {before['threads']}/{base['threads']}/{end['threads']}/{after['threads']}, "
        f"objects {base['objects']}/{end['objects']}"
    )
    assert counts["shift"] > 0 and counts["regenerate"] > 0 and counts["dropped_stream"] > 0
    assert growth < RSS_GROWTH
    assert end["fds"] == base["fds"] and end["threads"] == base["threads"]
    assert after["fds"] == before["fds"] and after["threads"] == before["threads"]
    assert mappings_of(smollm2_path) == []
    assert end["objects"] - base["objects"] < 0.02 * base["objects"]


def test_50_load_unload_cycles_alternating_two_models(smollm2_path, tmp_path):
    tiny = write_tiny_model(tmp_path / "tiny.gguf")
    models = [smollm2_path, tiny]
    warm_process(*models)
    before = snapshot()
    rss_at, base = [], None
    t0 = time.monotonic()
    for i in range(N_CYCLES):
        path = models[i % 2]
        with Engine(path, n_ctx=256) as engine:
            ids = engine.chat_prompt([{"role": "user", "content": f"Hello {i}"}])
            text = "".join(
                ev.text
                for ev in engine.generate(GenerationRequest(tuple(ids), max_tokens=4))
                if isinstance(ev, TextPiece)
            )
            assert isinstance(text, str)
        del engine  # close() unmaps at once unless numpy views still hold
        gc.collect()  # the mapping; then it goes with the engine's last reference
        assert mappings_of(path) == [], f"cycle {i}: {path} still mapped"
        if i == 3:  # both models loaded twice: warm
            base = snapshot()
        if i % 2 == 1:
            gc.collect()
            rss_at.append(rss())
    end = snapshot()
    growth = end["rss"] / base["rss"] - 1
    print(
        f"\nsoak load/unload: {N_CYCLES} cycles, {time.monotonic() - t0:.0f} s; RSS before "
        f"{before['rss'] >> 20} MB, after warm-up {base['rss'] >> 20} MB, at the end {end['rss'] >> 20} MB "
        f"({100 * growth:+.2f}%); every 2: {[r >> 20 for r in rss_at]} MB; fds {before['fds']}/{end['fds']}, "
        f"threads {before['threads']}/{end['threads']}, objects {base['objects']}/{end['objects']}"
    )
    assert growth < RSS_GROWTH
    assert end["fds"] == before["fds"] and end["threads"] == before["threads"]
    assert mappings_of(*models) == []


def test_a_few_hundred_turns_through_the_window(qtbot, make_window, smollm2_path):
    from PySide6.QtCore import Qt

    from tests.ui.conftest import drop_file

    warm_process(smollm2_path)
    before = snapshot()
    w = make_window()  # the real engine on its worker thread
    w.state.put("sampling_defaults", {"temperature": 0.7, "max_tokens": 6, "seed": 1})
    w.state.put("engine", {**w.state.engine_settings(), "n_ctx": 512})
    assert drop_file(w.chat.viewport(), smollm2_path)
    qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=60000)
    assert not w.errors, w.errors
    rng = random.Random(7)
    counts = dict.fromkeys(("turns", "stopped", "regenerate", "new_chat"), 0)
    base, rss_at = None, []
    t0 = time.monotonic()
    for i in range(N_WINDOW_TURNS + 1):
        if i and i % 60 == 0:
            # the view holds the messages of the chat on screen: objects are compared at the same
            # point of a chat, its start, after warm-up (turn 60) and at the end
            w.on_conversations_new_requested()
            counts["new_chat"] += 1
            qtbot.wait(300)
            if i == 60:
                base = snapshot()
                base["worker_children"], base["types"] = len(w.worker.children()), type_counts()
            if i == N_WINDOW_TURNS:
                break
        if i % 13 == 5 and w.state.last_assistant() is not None:
            w.regenerate()
            counts["regenerate"] += 1
        else:
            w.input.setPlainText(rng.choice(PROMPTS) + f" ({i})")
            qtbot.keyClick(w.input, Qt.Key_Return)
        if i % 17 == 3:
            w.stop()
            counts["stopped"] += 1
        qtbot.waitUntil(lambda: not w.generating, timeout=60000)
        counts["turns"] += 1
        if (i + 1) % 50 == 0:
            rss_at.append(rss())
    end = snapshot()
    end["worker_children"], end["types"] = len(w.worker.children()), type_counts()
    grown = (end["types"] - base["types"]).most_common(5)
    assert not w.errors, w.errors
    growth = end["rss"] / base["rss"] - 1
    w.close()
    after = snapshot()
    print(
        f"\nsoak window: {counts}, {time.monotonic() - t0:.0f} s; RSS after warm-up {base['rss'] >> 20} MB, "
        f"at the end {end['rss'] >> 20} MB ({100 * growth:+.2f}%); every 50: {[r >> 20 for r in rss_at]} MB; "
        f"objects {base['objects']}/{end['objects']} (most grown: {grown}); worker QObject children "
        f"{base['worker_children']}/{end['worker_children']}; fds {before['fds']}/{base['fds']}/{end['fds']}/"
        f"{after['fds']}, threads {before['threads']}/{base['threads']}/{end['threads']}/{after['threads']}"
    )
    assert growth < RSS_GROWTH
    assert end["objects"] - base["objects"] < 0.02 * base["objects"]
    assert end["worker_children"] == base["worker_children"]
    assert end["fds"] == base["fds"] and end["threads"] == base["threads"]
