"""Speculative decoding (app/engine/speculative.py): the verify pass, prompt lookup, the draft
model, and that a reply is the same with and without it -- token for token when greedy or seeded,
in distribution when sampled (chi-square tests against the target's own probabilities and
against plain sampling)."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from app.engine.engine import Engine
from app.engine.generate import ContextShifted, Finished, GenerationRequest, generate
from app.engine.sampler import GREEDY, Sampler, SamplerSettings
from app.engine.session import Session
from app.engine.speculative import (
    DraftModel,
    IncompatibleDraftError,
    PromptLookup,
    Speculator,
    verify_pass,
    vocab_fingerprint,
)
from tests.synth import TinySpec, write_tiny_model, write_tiny_spm_model


def chi2_sf(x: float, df: int) -> float:
    """P(chi-square with df degrees of freedom > x), Wilson-Hilferty (ample for p ~ 1e-3)."""
    z = ((x / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


def always(proposer, k_max=8) -> Speculator:
    """A speculator that looks for a guess after every token and makes it whenever its proposer
    can (no cost model): every path is used."""
    return Speculator(proposer, k_max=k_max, adaptive=False, plain_run=1)


class FixedGuess:
    """Guesses `tokens` after every context (right or wrong, the reply must not change)."""

    name = "fixed"
    last_match = 3

    def __init__(self, tokens):
        self.tokens = list(tokens)

    def propose(self, context, k):
        return self.tokens[:k]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("spec")
    target = write_tiny_model(d / "tiny7.gguf", TinySpec(n_ctx=256), seed=7)
    draft = write_tiny_model(d / "tiny8.gguf", TinySpec(n_ctx=256), seed=8)
    other = write_tiny_spm_model(d / "spm.gguf")
    eng = Engine(target, n_ctx=96, n_threads=1, kv_type="f32", n_batch=8, speculation="off")
    yield eng, target, draft, other
    eng.close()


def run(eng, req, speculator=None):
    eng.session.reset()
    events = list(generate(eng.session, eng.tokenizer, req, speculator))
    assert isinstance(events[-1], Finished)
    return events, events[-1]


# --- prompt lookup ------------------------------------------------------------------------------


def test_lookup_proposes_what_followed_the_longest_latest_match():
    pl = PromptLookup(min_ngram=2, max_ngram=8)
    #          0  1  2  3  4  5  6  7  8  9 10 11 12 13
    ctx = [9, 1, 2, 3, 50, 51, 7, 2, 3, 60, 61, 1, 2, 3]
    # "1 2 3" matched at 1..3 (length 3) beats the later "2 3" at 7..8 (length 2)
    assert pl.propose(ctx, 2) == [50, 51] and pl.last_match == 3
    assert pl.propose(ctx, 10) == [50, 51, 7, 2, 3, 60, 61, 1, 2, 3]
    assert pl.propose(ctx[:9] + [7, 2, 3], 3) == [7, 2, 3]  # "7 2 3" at 6..8
    assert pl.propose([1, 2, 3, 50, 1, 2, 3, 60, 1, 2, 3], 3) == [60, 1, 2]  # latest on a tie
    assert pl.propose([5, 6, 7, 8], 4) == []  # nothing earlier
    assert PromptLookup(min_ngram=4).propose(ctx, 2) == []  # too short a match
    assert pl.propose(ctx, 0) == []


def test_lookup_follows_a_context_that_shrinks_and_changes():
    pl = PromptLookup(min_ngram=1)
    a = list(range(40)) + [5]
    assert pl.propose(a, 3) == [6, 7, 8]
    assert pl.propose(a[:-1] + [30], 3) == [31, 32, 33]  # rolled back one, new tail
    assert pl.propose([7] + a[1:20] + [12], 2) == [13, 14]  # changed everywhere
    assert pl.propose(list(range(100, 3000)) + [2000], 2) == [2001, 2002]  # grows past its buffer


def test_k_follows_acceptance_and_cost():
    s = Speculator(PromptLookup(), k_max=8)
    assert s.choose_k(0.95, 8) >= 4
    assert s.choose_k(0.2, 8) == 0
    s.beta = 2.0  # a verified token costs two plain ones: never pays
    assert s.choose_k(0.95, 8) == 0
    s.beta, s.gamma = 0.05, 0.0
    assert s.choose_k(0.95, 8) == 8


def test_lookup_looks_again_soon_after_a_pass_and_seldom_in_a_plain_stretch():
    def lengths(s, n):
        out = []
        for _ in range(n):
            out.append(s.plain_run_length())
            s.note_plain(out[-1], 0.01 * out[-1])
        return out

    s = Speculator(PromptLookup(), k_max=8, plain_run=8)
    assert lengths(s, 7) == [1, 1, 2, 4, 8, 8, 8]
    s.note_pass(3, 4, 2, 0.02, 0.0)  # a pass (a guess rejected after two): look again at once
    assert lengths(s, 5) == [1, 1, 2, 4, 8]
    d = Speculator(FixedGuess([1]), k_max=8, plain_run=8)  # not lookup (a draft's guess costs decoding)
    assert lengths(d, 3) == [8, 8, 8]


# --- the verify pass keeps the target distribution ----------------------------------------------


class FixedLogits:
    """A decoder test double: the same logits after every token."""

    n_ctx, n_vocab = 64, 5

    def __init__(self, logits):
        self.row = np.asarray(logits, np.float32)

    def decode(self, tokens, start_pos, all_logits=False):
        rows = np.tile(self.row, (len(tokens), 1))
        return rows if all_logits else rows[-1].copy()

    def abort(self): ...

    def clear_abort(self): ...


def test_verify_pass_draws_from_the_target_distribution():
    """A guess d is accepted with probability p(d); the token a pass ends on follows p without d
    (renormalised) after a rejection and p after a full acceptance -- so the reply's tokens follow
    p. Chi-square goodness of fit of the first token and of the token after an accepted one."""
    logits = np.log(np.array([0.1, 0.3, 0.25, 0.2, 0.15]))
    p = np.exp(logits) / np.exp(logits).sum()
    sess = Session(FixedLogits(logits))
    sampler = Sampler(SamplerSettings(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=11))
    n = 6000
    first, second, accepted = np.zeros(5), np.zeros(5), 0
    for _ in range(n):
        sess.reset()
        sess.feed([0, 1])  # the cache holds the prompt but its last token
        sess.rollback(1)
        out, _ = verify_pass(sess, sampler, 1, [1, 1], ())
        assert sess.n_past == 1 + len(out)  # prompt, pending, the accepted guesses
        first[out[0]] += 1
        if out[0] == 1:
            accepted += 1
            second[out[1]] += 1
    for counts in (first, second):
        m = counts.sum()
        chi2 = float(((counts - m * p) ** 2 / (m * p)).sum())
        assert chi2_sf(chi2, 4) > 1e-3, (counts, m * p)
    # acceptance of the first guess: binomial(n, p(1) = 0.3) within 4 sigma
    assert abs(accepted - n * p[1]) < 4 * math.sqrt(n * p[1] * (1 - p[1]))


def test_sampled_reply_distribution_agrees_with_plain_sampling(tiny):
    """Independent seeds for the two arms: tokens 2..4 of short sampled continuations on a small
    real model, with and without (forced) speculation, tested for one distribution (chi-square
    test of homogeneity over the commonest tokens and an 'other' bin)."""
    eng, *_ = tiny
    prompt = tuple(eng.raw_prompt("the cat in the"))
    greedy = run(eng, GenerationRequest(prompt, max_tokens=5, stop_on_eog=False))[1].ids
    guess = FixedGuess(greedy[1:4])  # right often, wrong often
    arms = []
    for seeds, spec in ((range(0, 700), always(guess, 3)), (range(10_000, 10_700), None)):
        counts: dict[tuple[int, int], int] = {}
        for seed in seeds:
            s = SamplerSettings(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
            fin = run(eng, GenerationRequest(prompt, max_tokens=4, sampler=s, stop_on_eog=False), spec)[1]
            for pos in (1, 2, 3):
                counts[(pos, fin.ids[pos])] = counts.get((pos, fin.ids[pos]), 0) + 1
        arms.append(counts)
    assert spec is None and arms[0] != arms[1]
    keys = sorted(set(arms[0]) | set(arms[1]), key=lambda k: -(arms[0].get(k, 0) + arms[1].get(k, 0)))
    big = [k for k in keys if arms[0].get(k, 0) + arms[1].get(k, 0) >= 20]
    table = np.array([[a.get(k, 0) for k in big] + [sum(v for k, v in a.items() if k not in big)] for a in arms], float)
    table = table[:, table.sum(0) > 0]
    expect = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    chi2 = float(((table - expect) ** 2 / expect).sum())
    assert table.shape[1] >= 4
    assert chi2_sf(chi2, table.shape[1] - 1) > 1e-3, table


# --- the same reply, token for token ------------------------------------------------------------


@pytest.mark.parametrize(
    "sampler",
    [GREEDY, SamplerSettings(temperature=0.9, seed=5, repeat_penalty=1.3, penalty_last_n=16)],
    ids=["greedy", "seeded"],
)
def test_tiny_reply_is_the_same_with_every_proposer(tiny, sampler):
    eng, target, draft, _ = tiny
    prompt = tuple(eng.raw_prompt("hello there, the"))
    req = GenerationRequest(prompt, max_tokens=60, sampler=sampler, stop_on_eog=False)
    plain = run(eng, req)[1]
    dm = DraftModel(draft, eng.file, eng.n_ctx, pool=eng.decoder.pool)
    try:
        for spec in (
            always(PromptLookup(min_ngram=1), 8),
            always(FixedGuess(plain.ids[5:9]), 4),
            always(dm, 5),
            Speculator(PromptLookup()),
        ):
            fin = run(eng, req, spec)[1]
            assert fin.ids == plain.ids and fin.text == plain.text, spec.kind
            assert eng.session.tokens == list(prompt) + list(plain.ids[:-1])
            if spec.adaptive:
                continue
            st = fin.stats.spec
            assert st.passes > 0 and st.proposed >= st.accepted
            assert st.pass_tokens == st.passes + st.accepted
    finally:
        dm.close()


def test_draft_identical_to_target_accepts_every_guess(tiny):
    eng, target, *_ = tiny
    dm = DraftModel(target, eng.file, eng.n_ctx, pool=eng.decoder.pool)
    try:
        req = GenerationRequest(tuple(eng.raw_prompt("abc")), max_tokens=40, stop_on_eog=False)
        fin = run(eng, req, always(dm, 6))[1]
        st = fin.stats.spec
        assert st.accepted == st.proposed > 0 and st.tokens_per_pass > 4
        assert fin.ids == run(eng, req)[1].ids
    finally:
        dm.close()


def test_a_draft_of_another_vocabulary_is_refused(tiny):
    eng, target, draft, other = tiny
    from app.gguf import open_gguf

    with open_gguf(target) as a, open_gguf(draft) as b, open_gguf(other) as c:
        assert vocab_fingerprint(a) == vocab_fingerprint(b) != vocab_fingerprint(c)
    with pytest.raises(IncompatibleDraftError) as e:
        DraftModel(other, eng.file, eng.n_ctx)
    assert "vocabulary" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(IncompatibleDraftError):
        Engine(target, n_ctx=32, n_threads=1, draft=str(other))


def test_stop_strings_context_shift_and_cancel_with_speculation(tiny):
    eng, *_ = tiny
    prompt = tuple(eng.raw_prompt("abc"))
    free = run(eng, GenerationRequest(prompt, max_tokens=30, stop_on_eog=False))[1]
    stop = free.text[len(free.text) // 2 : len(free.text) // 2 + 2]
    req = GenerationRequest(prompt, max_tokens=30, stop_on_eog=False, stop_strings=(stop,))
    want = run(eng, req)[1]
    want_cache = list(eng.session.tokens)
    got = run(eng, req, always(PromptLookup(min_ngram=1), 8))[1]
    assert got.stop_reason == want.stop_reason == "stop_string"
    assert got.text == want.text and eng.session.tokens == want_cache
    # context shift: 96 positions, 150 tokens to make
    req = GenerationRequest(prompt, max_tokens=150, stop_on_eog=False, context_policy="shift", n_keep=1)
    ev_want, want = run(eng, req)
    ev_got, got = run(eng, req, always(PromptLookup(min_ngram=1), 8))
    assert got.ids == want.ids and got.stats.context_shifts == want.stats.context_shifts > 0
    assert [e for e in ev_got if isinstance(e, ContextShifted)] == [e for e in ev_want if isinstance(e, ContextShifted)]
    assert got.stats.spec.passes > 0
    # cancel from another thread part way: the reply stops, and is a prefix of the full one

    class CancelLater(PromptLookup):
        calls = 0

        def propose(self, context, k):
            CancelLater.calls += 1
            if CancelLater.calls == 5:
                t = threading.Thread(target=eng.cancel)
                t.start()
                t.join()
            return super().propose(context, k)

    req = GenerationRequest(prompt, max_tokens=80, stop_on_eog=False)
    full = run(eng, req)[1]
    fin = run(eng, req, always(CancelLater(min_ngram=1), 4))[1]
    assert fin.stop_reason == "cancelled" and 0 < len(fin.ids) < 80
    assert fin.ids == full.ids[: len(fin.ids)]
    assert run(eng, req, always(PromptLookup(min_ngram=1)))[1].ids == full.ids  # cancel cleared


def test_live_stats_report_speculation(tiny):
    eng, *_ = tiny
    req = GenerationRequest(tuple(eng.raw_prompt("abc abc abc abc")), max_tokens=40, stop_on_eog=False)
    spec = always(PromptLookup(min_ngram=1), 8)
    st = run(eng, req, spec)[1].stats
    d = st.as_dict()["spec"]
    assert d["kind"] == "lookup" and d["passes"] == st.spec.passes > 0
    assert 0 <= d["acceptance"] <= 1 and d["tokens_per_pass"] >= 1
    assert "speculation (lookup)" in st.summary()


# --- the real model -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smol(smollm2_path):
    eng = Engine(smollm2_path, n_ctx=512, n_threads=2, speculation="off")
    yield eng
    eng.close()


def test_step_all_is_bit_identical_to_single_steps_and_rollback_reuses_the_cache(smol):
    sess = smol.session
    ids = smol.raw_prompt("The quick brown fox jumps over the lazy dog because")
    sess.reset()
    sess.feed(ids[:5])
    rows = sess.step_all(ids[5:])
    assert sess.n_past == len(ids)
    sess.rollback(len(ids) - 5)
    assert sess.tokens == ids[:5]
    for i, t in enumerate(ids[5:]):
        assert np.array_equal(sess.step(t), rows[i]), i
    with pytest.raises(ValueError):
        sess.rollback(sess.n_past + 1)


def _same_on_goldens(smol, cases, n):
    for case in cases:
        req = GenerationRequest(tuple(case["prompt_ids"]), max_tokens=n, stop_on_eog=False)
        want = run(smol, req)[1]
        for spec in (always(PromptLookup(min_ngram=1), 4), Speculator(PromptLookup())):
            got = run(smol, req, spec)[1]
            assert got.ids == want.ids, case["text"][-40:]


def test_smollm2_goldens_are_the_same_with_speculation(smol, smollm2_goldens):
    """Greedy replies to golden prompts, plain and with guesses (prompt lookup taking any match,
    so many guesses are wrong; and the adaptive default): token for token the same."""
    _same_on_goldens(smol, smollm2_goldens["cases"][:12:4], 24)


@pytest.mark.slow
def test_smollm2_all_goldens_are_the_same_with_speculation(smol, smollm2_goldens):
    _same_on_goldens(smol, smollm2_goldens["cases"], 64)


def test_smollm2_seeded_sampling_is_the_same_with_speculation(smol):
    msgs = [{"role": "user", "content": "Repeat exactly: the red fox, the red fox, the red fox."}]
    req = GenerationRequest(
        tuple(smol.chat_prompt(msgs)),
        max_tokens=40,
        sampler=SamplerSettings(temperature=0.7, seed=42, repeat_penalty=1.1),
    )
    want = run(smol, req)[1]
    got = run(smol, req, always(PromptLookup(min_ngram=1), 6))[1]
    assert got.ids == want.ids and got.stats.spec.passes > 0


def test_gemma3_greedy_is_the_same_with_speculation():
    """Gemma 3 270M (262,144-token vocabulary, sliding-window layers): plain and speculative
    greedy replies agree token for token, and SmolLM2 is refused as its draft in one line."""
    from tests.engine.test_decoder_gemma3 import fetch_gemma3
    from tests.models import require_smollm2

    try:
        path = fetch_gemma3()
    except Exception as e:
        pytest.fail(str(e), pytrace=False)
    with Engine(path, n_ctx=256, n_threads=2, speculation="off") as eng:
        msgs = [{"role": "user", "content": "Copy this list: apples, pears, plums, apples, pears, plums."}]
        req = GenerationRequest(tuple(eng.chat_prompt(msgs)), max_tokens=24, stop_on_eog=False)
        want = run(eng, req)[1]
        got = run(eng, req, always(PromptLookup(min_ngram=1), 4))[1]
        assert got.ids == want.ids and got.stats.spec.passes > 0
        with pytest.raises(IncompatibleDraftError):
            DraftModel(require_smollm2(), eng.file, eng.n_ctx)


def test_compatible_drafts_and_cli_flags(tiny, capsys):
    from app.engine.cli import main
    from app.engine.speculative import compatible_drafts

    eng, target, draft, other = tiny
    assert compatible_drafts(target, [target, draft, other, "/nonexistent.gguf"], 1.0) == [str(draft)]
    assert compatible_drafts(target, [draft]) == []  # not smaller: no use as a draft
    base = [
        "generate",
        str(target),
        "--raw",
        "--prompt",
        "abc",
        "--temperature",
        "0",
        "--max-tokens",
        "12",
        "--threads",
        "1",
        "--ctx",
        "64",
        "--json",
    ]
    import json

    outs = []
    for extra in ([], ["--speculation", "off"], ["--draft", str(draft), "--draft-max", "3"], ["--draft", "auto"]):
        assert main(base + extra) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert len({tuple(o["ids"]) for o in outs}) == 1
    assert outs[0]["stats"]["spec"]["kind"] == "lookup" and outs[1]["stats"]["spec"] is None
    assert outs[2]["stats"]["spec"]["kind"] == "draft" and outs[3]["stats"]["spec"]["kind"] == "lookup"
    assert main(base + ["--draft", str(other)]) == 4
    err = capsys.readouterr().err
    assert "vocabulary" in err and err.count("\n") == 1
    with pytest.raises(SystemExit):
        main(base + ["--draft-max", "17"])
