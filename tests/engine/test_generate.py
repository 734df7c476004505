"""Generation end to end: events, stop reasons, context policies, cancel, seeds, statistics.
Oracle for greedy tokens: the numpy reference forward pass (tiny model) and llama.cpp's goldens
(SmolLM2)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from app.engine.engine import Chat, Engine
from app.engine.generate import (ContextShifted, Finished, GenerationRequest, PromptProgress,
                                 TextPiece)
from app.engine.sampler import SamplerSettings
from tests.reference.forward import ReferenceModel
from tests.synth import TinySpec, write_tiny_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = write_tiny_model(tmp_path_factory.mktemp("g") / "tiny.gguf", TinySpec(n_ctx=256), seed=7)
    eng = Engine(path, n_ctx=64, n_threads=1, kv_type="f32", n_batch=8)
    yield eng, path
    eng.close()


def run(eng, req):
    events = list(eng.generate(req))
    assert isinstance(events[-1], Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1
    return events, events[-1]


def test_greedy_tokens_follow_the_reference_argmax(tiny):
    eng, path = tiny
    prompt = eng.raw_prompt("hello there, the")
    events, fin = run(eng, GenerationRequest(tuple(prompt), max_tokens=20, stop_on_eog=False))
    assert fin.stop_reason == "length" and len(fin.ids) == 20
    ref = ReferenceModel(path).forward(list(prompt) + list(fin.ids[:-1]))
    want = ref[len(prompt) - 1:].argmax(-1)
    assert list(fin.ids) == [int(t) for t in want]
    shown = "".join(e.text for e in events if isinstance(e, TextPiece))
    assert shown == fin.text == eng.tokenizer.decode(fin.ids)
    progress = [e for e in events if isinstance(e, PromptProgress)]
    assert progress[-1].done == progress[-1].total
    st = fin.stats
    assert st.prompt_tokens == len(prompt) and st.generated_tokens == 20
    assert st.threads == 1 and st.peak_rss_bytes > 0 and st.ttft_s > 0
    assert st.prompt_tok_s > 0 and st.generation_tok_s > 0


def test_stop_string_and_max_tokens_zero(tiny):
    eng, _ = tiny
    prompt = tuple(eng.raw_prompt("abc"))
    _, free = run(eng, GenerationRequest(prompt, max_tokens=12, stop_on_eog=False))
    stop = free.text[3:5]
    assert stop
    events, fin = run(eng, GenerationRequest(prompt, max_tokens=12, stop_on_eog=False,
                                             stop_strings=(stop,)))
    assert fin.stop_reason == "stop_string" and fin.stop_string == stop
    assert stop not in fin.text and free.text.startswith(fin.text)
    _, fin = run(eng, GenerationRequest(prompt, max_tokens=0))
    assert fin.stop_reason == "length" and fin.ids == ()


def test_context_full_stop_and_shift(tiny):
    eng, path = tiny
    prompt = tuple(eng.raw_prompt("x" * 50))          # 50 tokens, context 64
    _, fin = run(eng, GenerationRequest(prompt, max_tokens=40, stop_on_eog=False))
    assert fin.stop_reason == "context_full" and len(fin.ids) == 64 - 50 + 1
    events, fin = run(eng, GenerationRequest(prompt, max_tokens=40, stop_on_eog=False,
                                             context_policy="shift", n_keep=4))
    shifts = [e for e in events if isinstance(e, ContextShifted)]
    assert fin.stop_reason == "length" and len(fin.ids) == 40 and shifts
    assert fin.stats.context_shifts == len(shifts)
    # the exact policy: after a shift the cache holds exactly what decoding the kept tokens
    # afresh gives, so the last token is the reference's arg-max over them
    eng.session.shift_in_place = False
    try:
        _, fin = run(eng, GenerationRequest(prompt, max_tokens=40, stop_on_eog=False,
                                            context_policy="shift", n_keep=4))
        ref = ReferenceModel(path).forward(list(eng.session.tokens))
        assert int(ref[-1].argmax()) == fin.ids[-1]
    finally:
        eng.session.shift_in_place = True
    # a prompt longer than the context: stop refuses, shift keeps n_keep and the newest tokens
    long_prompt = tuple(eng.raw_prompt("y" * 100))
    _, fin = run(eng, GenerationRequest(long_prompt, max_tokens=3))
    assert fin.stop_reason == "context_full" and fin.ids == ()
    events, fin = run(eng, GenerationRequest(long_prompt, max_tokens=3, context_policy="shift", n_keep=2))
    assert isinstance(events[0], ContextShifted) and len(fin.ids) == 3


def test_prefix_reuse_across_requests(tiny):
    eng, _ = tiny
    p1 = tuple(eng.raw_prompt("the cat sat on the mat"))
    run(eng, GenerationRequest(p1, max_tokens=3, stop_on_eog=False))
    p2 = p1 + tuple(eng.raw_prompt(" and then"))
    _, fin = run(eng, GenerationRequest(p2, max_tokens=3, stop_on_eog=False))
    assert fin.stats.prompt_tokens == len(p2)
    assert fin.stats.prompt_tokens_evaluated == len(p2) - len(p1)


def test_same_seed_same_text_and_cancel(tiny):
    eng, _ = tiny
    prompt = tuple(eng.raw_prompt("seed test"))
    s = SamplerSettings(temperature=1.0, seed=11, top_k=0, min_p=0.0, top_p=1.0)
    a = run(eng, GenerationRequest(prompt, max_tokens=15, sampler=s, stop_on_eog=False))[1]
    b = run(eng, GenerationRequest(prompt, max_tokens=15, sampler=s, stop_on_eog=False))[1]
    assert a.ids == b.ids and a.text == b.text
    gen = eng.generate(GenerationRequest(prompt, max_tokens=50, stop_on_eog=False))
    n = 0
    for ev in gen:
        if isinstance(ev, TextPiece):
            n += 1
            if n == 3:
                t = threading.Thread(target=eng.cancel)
                t.start()
                t.join()
        if isinstance(ev, Finished):
            fin = ev
    assert fin.stop_reason == "cancelled" and len(fin.ids) <= 4
    _, again = run(eng, GenerationRequest(prompt, max_tokens=5, stop_on_eog=False))
    assert again.stop_reason == "length"       # a cancel does not leak into the next request


def test_smollm2_chat_generation_matches_llamacpp(smollm2_path, smollm2_goldens):
    case = next(c for c in smollm2_goldens["cases"] if c["kind"] == "chat")
    with Engine(smollm2_path, n_ctx=512, n_threads=2) as eng:
        messages = [{"role": "user", "content": case["user"]}]
        ids = eng.chat_prompt(messages)
        assert ids == case["prompt_ids"]
        _, fin = run(eng, GenerationRequest(tuple(ids), max_tokens=16))
        want = case["ids"][:len(fin.ids)]
        assert list(fin.ids) == want and fin.stop_reason in ("eog", "length")
        assert fin.stats.sample_share < 0.03
        chat = Chat(eng)
        first = [e for e in chat.send(case["user"], SamplerSettings(temperature=0.0), 16)][-1]
        assert list(first.ids) == want
        second = [e for e in chat.send("And of France?", SamplerSettings(temperature=0.0), 16)][-1]
        # the follow-up decodes only its own new tokens, not the whole history
        assert second.stats.prompt_tokens_evaluated < second.stats.prompt_tokens / 2


@pytest.mark.parametrize("kv_type,tol", [("f32", 1e-4), ("f16", 2e-2)])
def test_kv_shift_in_place_equals_fresh_decode_on_one_layer(tmp_path, kv_type, tol):
    """With one layer, K and V depend only on each token and its position, so moving keys by a
    re-rotation must give exactly the cache a fresh decode of the shortened sequence builds."""
    from app.engine.decoder import CDecoder
    from app.engine.session import Session
    from app.gguf import open_gguf
    from app.model import config_from_gguf

    path = write_tiny_model(tmp_path / "one.gguf", TinySpec(n_layer=1, rope_base=500.0), seed=9)
    ids = [int(t) for t in np.random.default_rng(0).integers(3, 260, 40)]
    short = ids[:6] + ids[20:]
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        with CDecoder(f, cfg, 64, kv_type=kv_type, n_threads=1) as a, \
                CDecoder(f, cfg, 64, kv_type=kv_type, n_threads=1) as b:
            s = Session(a, n_batch=16)
            s.feed(ids)
            got = s.feed(short + [7, 8])           # finds the dropped block, shifts in place
            assert s.last_evaluated == 2 and s.tokens == short + [7, 8]
            want = b.decode(short + [7, 8], 0)
            np.testing.assert_allclose(got, want, atol=tol)
            exact = Session(b, n_batch=16, shift_in_place=False)
            exact.feed(ids)
            exact.feed(short + [7, 8])
            assert exact.last_evaluated == len(short) + 2 - 6


def test_chat_drops_oldest_turns_and_reuses_the_cache(smollm2_path):
    with Engine(smollm2_path, n_ctx=192, n_threads=2) as eng:
        chat = Chat(eng, system="You are brief.", reserve=48)
        shifted, last = [], None
        for q in ["Name a fruit.", "Name a colour.", "Name an animal.", "Name a city.",
                  "Name a river.", "Name a planet."]:
            for ev in chat.send(q, SamplerSettings(temperature=0.0), max_tokens=24):
                if isinstance(ev, ContextShifted):
                    shifted.append(ev)
                if isinstance(ev, Finished):
                    last = ev
                    assert ev.stop_reason in ("eog", "length", "context_full")
            if shifted:
                break
        assert shifted and chat.dropped_turns >= 1 and shifted[0].dropped_turns >= 1
        assert shifted[0].dropped > 10
        assert chat.messages[0]["content"] != "Name a fruit."
        # the turns after the dropped ones were moved in the cache, not decoded again
        assert last.stats.prompt_tokens_evaluated < last.stats.prompt_tokens / 2
