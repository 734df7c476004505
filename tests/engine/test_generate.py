"""Generation end to end: events, stop reasons, context policies, cancel, seeds, statistics.
Oracle for greedy tokens: the numpy reference forward pass (tiny model) and llama.cpp's goldens
(SmolLM2)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from app.engine.engine import Chat, Engine
from app.engine.generate import ContextShifted, Finished, GenerationRequest, PromptProgress, TextPiece
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
    want = ref[len(prompt) - 1 :].argmax(-1)
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
    events, fin = run(eng, GenerationRequest(prompt, max_tokens=12, stop_on_eog=False, stop_strings=(stop,)))
    assert fin.stop_reason == "stop_string" and fin.stop_string == stop
    assert stop not in fin.text and free.text.startswith(fin.text)
    _, fin = run(eng, GenerationRequest(prompt, max_tokens=0))
    assert fin.stop_reason == "length" and fin.ids == ()


def test_context_full_stop_and_shift(tiny):
    eng, path = tiny
    prompt = tuple(eng.raw_prompt("x" * 50))  # 50 tokens, context 64
    _, fin = run(eng, GenerationRequest(prompt, max_tokens=40, stop_on_eog=False))
    assert fin.stop_reason == "context_full" and len(fin.ids) == 64 - 50 + 1
    events, fin = run(
        eng, GenerationRequest(prompt, max_tokens=40, stop_on_eog=False, context_policy="shift", n_keep=4)
    )
    shifts = [e for e in events if isinstance(e, ContextShifted)]
    assert fin.stop_reason == "length" and len(fin.ids) == 40 and shifts
    assert fin.stats.context_shifts == len(shifts)
    # the exact policy: after a shift the cache holds exactly what decoding the kept tokens
    # afresh gives, so the last token is the reference's arg-max over them
    eng.session.shift_in_place = False
    try:
        _, fin = run(eng, GenerationRequest(prompt, max_tokens=40, stop_on_eog=False, context_policy="shift", n_keep=4))
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
    assert again.stop_reason == "length"  # a cancel does not leak into the next request


def test_smollm2_chat_generation_matches_llamacpp(smollm2_path, smollm2_goldens):
    case = next(c for c in smollm2_goldens["cases"] if c["kind"] == "chat")
    with Engine(smollm2_path, n_ctx=512, n_threads=2) as eng:
        messages = [{"role": "user", "content": case["user"]}]
        ids = eng.chat_prompt(messages)
        assert ids == case["prompt_ids"]
        _, fin = run(eng, GenerationRequest(tuple(ids), max_tokens=16))
        want = case["ids"][: len(fin.ids)]
        assert list(fin.ids) == want and fin.stop_reason in ("eog", "length")
        assert fin.stats.sample_share < 0.03
        chat = Chat(eng)
        first = [e for e in chat.send(case["user"], SamplerSettings(temperature=0.0), 16)][-1]
        assert list(first.ids) == want
        second = [e for e in chat.send("And of France?", SamplerSettings(temperature=0.0), 16)][-1]
        # the follow-up decodes only its own new tokens, not the whole history
        assert second.stats.prompt_tokens_evaluated < second.stats.prompt_tokens / 2


@pytest.mark.parametrize(
    "kv_type,tol,n_embd,n_head",
    # q8_0 with heads of 64: the cache holds Hadamard-rotated keys, which the shift must rotate back
    # before RoPE and again after (its keys are quantized twice, hence the looser bound)
    [("f32", 1e-4, 64, 4), ("f16", 2e-2, 64, 4), ("q8_0", 0.15, 128, 2)],
)
def test_kv_shift_in_place_equals_fresh_decode_on_one_layer(tmp_path, kv_type, tol, n_embd, n_head):
    """With one layer, K and V depend only on each token and its position, so moving keys by a
    re-rotation must give exactly the cache a fresh decode of the shortened sequence builds."""
    from app.engine.decoder import CDecoder
    from app.engine.session import Session
    from app.gguf import open_gguf
    from app.model import config_from_gguf

    spec = TinySpec(n_layer=1, rope_base=500.0, n_embd=n_embd, n_head=n_head)
    path = write_tiny_model(tmp_path / "one.gguf", spec, seed=9)
    ids = [int(t) for t in np.random.default_rng(0).integers(3, 260, 40)]
    short = ids[:6] + ids[20:]
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        with (
            CDecoder(f, cfg, 64, kv_type=kv_type, n_threads=1) as a,
            CDecoder(f, cfg, 64, kv_type=kv_type, n_threads=1) as b,
        ):
            s = Session(a, n_batch=16)
            s.feed(ids)
            got = s.feed(short + [7, 8])  # finds the dropped block, shifts in place
            assert s.last_evaluated == 2 and s.tokens == short + [7, 8]
            want = b.decode(short + [7, 8], 0)
            np.testing.assert_allclose(got, want, atol=tol)
            exact = Session(b, n_batch=16, shift_in_place=False)
            exact.feed(ids)
            exact.feed(short + [7, 8])
            assert exact.last_evaluated == len(short) + 2 - 6


@pytest.mark.parametrize("kv_type", ["f32", "q8_0"])
def test_a_cache_of_several_blocks_shifts_and_saves_like_one(tmp_path, kv_type):
    """The cache holds its positions in blocks of 256, head after head in each; a context of 700
    ends in a partial block. A shift whose moves cross blocks at both ends must equal a fresh
    decode of the shortened sequence (one layer: a key depends on its token and position alone),
    and the saved image stays position-major whatever the layout: its first rows for 300
    positions are those of 600, and it restores into another decoder bit for bit."""
    from app.engine.decoder import CDecoder
    from app.gguf import open_gguf
    from app.model import config_from_gguf

    spec = TinySpec(n_layer=1, rope_base=500.0, n_embd=128, n_head=2)
    path = write_tiny_model(tmp_path / "one.gguf", spec, seed=3)
    ids = [int(t) for t in np.random.default_rng(2).integers(3, 260, 600)]
    keep = ids[:100] + ids[300:]
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        with (
            CDecoder(f, cfg, 700, kv_type=kv_type, n_threads=2) as a,
            CDecoder(f, cfg, 700, kv_type=kv_type, n_threads=2) as b,
        ):
            a.decode(ids, 0)
            img600, img300 = a.kv_read(600), a.kv_read(300)
            rows600 = img600.reshape(2, 600, -1)  # K then V, a row per position
            np.testing.assert_array_equal(rows600[:, :300], img300.reshape(2, 300, -1))
            b.kv_write(img600, 600)
            np.testing.assert_array_equal(a.decode([9], 600), b.decode([9], 600))
            assert a.kv_shift(100, 200, 601)
            shifted = a.decode([7], 401)
        with CDecoder(f, cfg, 700, kv_type=kv_type, n_threads=2) as c:
            fresh = c.decode(keep + [9, 7], 0)
    tol = 1e-4 if kv_type == "f32" else 0.3  # keys quantized twice (0.21 measured, the same in either layout)
    assert np.abs(shifted - fresh).max() < tol, np.abs(shifted - fresh).max()


def test_chat_drops_oldest_turns_and_reuses_the_cache(smollm2_path):
    with Engine(smollm2_path, n_ctx=192, n_threads=2) as eng:
        chat = Chat(eng, system="You are brief.", reserve=48)
        shifted, last = [], None
        for q in [
            "Name a fruit.",
            "Name a colour.",
            "Name an animal.",
            "Name a city.",
            "Name a river.",
            "Name a planet.",
        ]:
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


# --- runs of tokens made in C (Session.sample_run -> CDecoder.generate -> llk_generate) ----------


class _PerToken:
    """The C decoder without its `generate`: Session.sample_run takes the Python loop."""

    def __init__(self, d):
        self._d = d
        self.n_ctx, self.n_vocab = d.n_ctx, d.n_vocab

    def decode(self, *a, **k):
        return self._d.decode(*a, **k)

    def abort(self):
        self._d.abort()

    def clear_abort(self):
        self._d.clear_abort()


PENALIZED = SamplerSettings(
    temperature=0.9,
    seed=5,
    top_k=20,
    top_p=0.9,
    min_p=0.02,
    repeat_penalty=1.3,
    frequency_penalty=0.2,
    presence_penalty=0.1,
    penalty_last_n=8,
)


@pytest.mark.parametrize("settings", [SamplerSettings(temperature=0.0), PENALIZED], ids=["greedy", "sampled"])
def test_a_run_in_c_equals_the_per_token_loop(tiny, settings):
    """Same tokens, same cache contents: the C loop samples with the same window and the same
    uniform draws (Sampler.uniforms) as sample() token by token."""
    from app.engine.sampler import Sampler
    from app.engine.session import Session

    eng, _ = tiny
    prompt = eng.raw_prompt("the cat sat on the mat and")
    got = []
    for dec in (eng.decoder, _PerToken(eng.decoder)):
        s = Session(dec, n_batch=8)
        logits = s.feed(prompt)
        sampler = Sampler(settings)
        toks, ts, cancelled = s.sample_run(logits, sampler, 30, max_seconds=60)
        assert not cancelled and len(toks) == 30 and ts >= 0
        assert s.tokens == list(prompt) + toks[:-1]  # all but the last decoded
        got.append(toks)
    assert got[0] == got[1]


def test_a_run_stops_at_a_stop_id_and_at_its_time_limit(tiny):
    from app.engine.sampler import Sampler
    from app.engine.session import Session

    eng, _ = tiny
    prompt = eng.raw_prompt("once upon a time")
    s = Session(eng.decoder, n_batch=8)
    free, _, _ = s.sample_run(s.feed(prompt), Sampler(), 12, max_seconds=60)
    s = Session(eng.decoder, n_batch=8)
    toks, _, _ = s.sample_run(s.feed(prompt), Sampler(), 12, stop_ids={free[4]}, max_seconds=60)
    assert toks == free[: free.index(free[4]) + 1]  # the stop id ends the run, undecoded
    assert s.n_past == len(prompt) + len(toks) - 1
    s = Session(eng.decoder, n_batch=8)
    toks, _, _ = s.sample_run(s.feed(prompt), Sampler(), 12, max_seconds=0.0)
    assert len(toks) == 1 and s.n_past == len(prompt)  # no time: one token, nothing decoded
    with pytest.raises(Exception):
        s.sample_run(s.logits, Sampler(), eng.n_ctx, max_seconds=60)  # would overflow the context


def test_a_run_holds_no_interpreter_lock(tiny):
    """While C makes tokens, another Python thread runs (a UI thread drawing stays fluid and
    never delays the next token): a ~250-token run on the tiny model, a counting thread beside it."""
    from app.engine.sampler import Sampler
    from app.engine.session import Session

    _, path = tiny
    counts = []
    with Engine(path, n_ctx=256, n_threads=1, kv_type="f32") as eng:
        for _ in range(5):  # a busy machine may not run the counter at once: retry
            s = Session(eng.decoder)
            logits = s.feed(eng.raw_prompt("a"))
            ticks, stop = [0], threading.Event()

            def count():
                while not stop.is_set():
                    ticks[0] += 1

            t = threading.Thread(target=count)
            t.start()
            try:
                before = ticks[0]
                toks, _, _ = s.sample_run(logits, Sampler(), eng.n_ctx - s.n_past, max_seconds=60)
                counts.append(ticks[0] - before)
            finally:
                stop.set()
                t.join()
            assert len(toks) > 200
            if counts[-1] > 1000:
                break
    assert max(counts) > 1000, counts


def test_stop_string_inside_a_run_leaves_the_cache_as_one_token_at_a_time(tiny):
    """A run decodes past a stop string; those tokens leave the cache again: it holds the prompt
    and the reply but its last token, as when tokens were made one per call."""
    eng, _ = tiny
    prompt = tuple(eng.raw_prompt("abc"))
    _, free = run(eng, GenerationRequest(prompt, max_tokens=20, stop_on_eog=False))
    stop = free.text[6:8]
    _, fin = run(eng, GenerationRequest(prompt, max_tokens=20, stop_on_eog=False, stop_strings=(stop,)))
    assert fin.stop_reason == "stop_string" and len(fin.ids) < 20
    assert eng.session.tokens == list(prompt) + list(fin.ids[:-1])


def test_a_seed_gives_the_same_text_however_the_runs_are_cut(tiny):
    """Runs end early when their time is up (a slow machine makes shorter runs); the draws they
    did not use go to the next token, so a seed's text never depends on the machine's speed."""
    from app.engine.sampler import Sampler
    from app.engine.session import Session

    eng, _ = tiny
    prompt = eng.raw_prompt("one seed")
    got = []
    for max_seconds in (60.0, 0.0):  # one long run; runs of one token each
        s = Session(eng.decoder, n_batch=8)
        logits = s.feed(prompt)
        sampler = Sampler(PENALIZED)
        toks = []
        while len(toks) < 24:
            run, _, _ = s.sample_run(logits, sampler, 24 - len(toks), max_seconds=max_seconds)
            toks += run
            if len(toks) < 24:
                logits = s.step(run[-1])
        got.append(toks)
    assert got[0] == got[1]


def test_llk_generate_refuses_bad_arguments(tiny):
    """The C entry point checks what it is given: null pointers, no room, a bad position."""
    from app.engine.sampler import Sampler
    from app.kernels import ffi, lib

    eng, _ = tiny
    d, s = eng.decoder, Sampler()
    logits = np.zeros(d.n_vocab, np.float32)
    hist, out = np.zeros(8, np.int32), np.zeros(8, np.int32)
    u = np.zeros(8)
    n_out = ffi.new("int64_t *")
    args = dict(
        d=d.ptr,
        logits=ffi.from_buffer("float[]", logits),
        n_vocab=d.n_vocab,
        pos=0,
        hist=ffi.from_buffer("int32_t[]", hist),
        n_hist=0,
        n_window=0,
        p=s.params,
        u=ffi.from_buffer("double[]", u),
        stop=ffi.NULL,
        n_stop=0,
        max_tokens=4,
        max_seconds=1.0,
        scratch=ffi.from_buffer(s.scratch(d.n_vocab)),
        out=ffi.from_buffer("int32_t[]", out),
        n_out=n_out,
        ts=ffi.NULL,
    )
    assert lib.llk_generate(*args.values()) == 0 and n_out[0] == 4
    eng.session.reset()  # that run wrote the cache behind the session's back
    for bad in (
        dict(d=ffi.NULL),
        dict(logits=ffi.NULL),
        dict(n_vocab=0),
        dict(pos=-1),
        dict(max_tokens=0),
        dict(n_stop=1),
        dict(scratch=ffi.NULL),
        dict(out=ffi.NULL),
        dict(n_out=ffi.NULL),
        dict(u=ffi.NULL),
    ):
        assert lib.llk_generate(*{**args, **bad}.values()) == 1, bad  # LLK_ERR_ARG
