"""No state leaks between generations: on one engine, with the same seed and settings, prompt A
gives the same reply before and after another prompt B, after a reply that shifted the context,
after a cancelled reply, and after switching to another model and back (the window's engine
adapter, which is what switches models). SmolLM2, sampled at temperature 0.8 (not greedy: the
random draws would show a leak in the sampler too)."""

from __future__ import annotations

import pytest

from app.engine.engine import Engine
from app.engine.generate import ContextShifted, Finished, GenerationRequest, TextPiece
from app.engine.sampler import SamplerSettings

SETTINGS = SamplerSettings(temperature=0.8, seed=1234)
A = [{"role": "user", "content": "Write one sentence about cats."}]
B = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "Name three colours of the rainbow."},
]
N = 16
N_CTX = 64  # A and B fit with their replies; a long reply does not


def reply(eng: Engine, messages, max_tokens: int = N, **kw) -> Finished:
    ids = eng.chat_prompt(messages)
    req = GenerationRequest(tuple(ids), max_tokens=max_tokens, sampler=SETTINGS, **kw)
    return [ev for ev in eng.generate(req) if isinstance(ev, Finished)][0]


@pytest.fixture(scope="module")
def engine(smollm2_path):
    with Engine(smollm2_path, n_ctx=N_CTX) as eng:
        yield eng


@pytest.fixture(scope="module")
def first_a(engine):
    fin = reply(engine, A)
    assert fin.stats.generated_tokens == N  # long enough to compare
    return fin.ids


def test_a_then_b_then_a(engine, first_a):
    b = reply(engine, B)
    assert b.ids != first_a
    assert reply(engine, A).ids == first_a


def test_a_after_a_context_shift(engine, first_a):
    # a reply longer than the context left: the session drops old tokens and shifts the cache
    ids = engine.chat_prompt(B)
    events = list(
        engine.generate(
            GenerationRequest(
                tuple(ids),
                max_tokens=engine.n_ctx - len(ids) + 16,
                sampler=SETTINGS,
                stop_on_eog=False,
                context_policy="shift",
                n_keep=1,
            )
        )
    )
    assert any(isinstance(ev, ContextShifted) for ev in events), "the test needs a context shift"
    assert reply(engine, A).ids == first_a


def test_a_after_a_cancelled_reply(engine, first_a):
    ids = engine.chat_prompt(B)
    seen = 0
    fin = None
    for ev in engine.generate(GenerationRequest(tuple(ids), max_tokens=N, sampler=SETTINGS)):
        if isinstance(ev, TextPiece):
            seen += 1
            if seen == 3:
                engine.cancel()
        elif isinstance(ev, Finished):
            fin = ev
    assert fin.stop_reason == "cancelled"
    assert reply(engine, A).ids == first_a


def test_a_after_switching_models_and_back(smollm2_path, tmp_path):
    """The window's adapter: load SmolLM2, answer A, load another model and answer, load SmolLM2
    again: A's reply is the same text."""
    from app.ui.engine_adapter import RealEngine
    from tests.synth import write_tiny_model

    other = write_tiny_model(tmp_path / "tiny.gguf")
    settings = {
        "temperature": 0.8,
        "seed": 1234,
        "max_tokens": N,
        "top_k": 40,
        "top_p": 0.95,
        "min_p": 0.05,
        "repeat_penalty": 1.0,
    }

    def answer(eng, messages):
        return "".join(ev.text for ev in eng.generate(messages, settings) if isinstance(ev, TextPiece))

    eng = RealEngine()
    try:
        eng.load(str(smollm2_path), N_CTX, 0, lambda f: None)
        a1 = answer(eng, A)
        assert a1.strip()
        eng.load(str(other), N_CTX, 0, lambda f: None)
        answer(eng, A)
        eng.load(str(smollm2_path), N_CTX, 0, lambda f: None)
        assert answer(eng, A) == a1
    finally:
        eng.close()
