"""The C decoder on SmolLM2-135M-Instruct Q4_1 against llama.cpp's greedy continuations.

For each golden prompt (raw and chat-templated, prompt ids from llama.cpp's own tokenizer) the
prompt is decoded as one batch, then the golden tokens one per call (teacher forcing, as in
generation). Three checks per prompt:

1. the centered top-8 logits of every step differ from llama.cpp's by a mean < 0.2;
2. where our arg-max differs from llama.cpp's, llama.cpp's own top-two gap is < GAP_TOLERANCE;
3. such divergences with a gap >= 0.1 are few (<= MAX_WIDE_DIVERGENCES over the prompts tested).

Why not "divergences only below a gap of 0.1": llama.cpp disagrees with itself by more. Decoding
the same sequence as one batch instead of one token per call changes only its summation order,
yet with 8-bit activations over 30 layers that flips rounding decisions that cascade: its logits
move by a mean of 0.085 and its arg-max flips at gaps up to 0.31 (recorded per prompt in the
golden file as `llamacpp_batch_divergence`). Our logits sit at the same floor (mean 0.08..0.12;
F16 weights, where no activation is quantized: 0.002 and no divergence at all), and the largest
gap at which we diverge is a heavy-tailed statistic of that noise: over 72 prompt runs it ranged
0.07..0.66 between builds of the kernels that differ only in rounding order. A wrong decoder
(a bad norm epsilon, RoPE base, head layout) moves the mean by whole units and fails check 1.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.decoder import CDecoder
from app.model import config_from_gguf
from tests.engine.conftest import ISA_LEVELS

GAP_TOLERANCE = 0.75
MEAN_TOP8_TOLERANCE = 0.2
MAX_WIDE_DIVERGENCES_PER_PROMPT = 1.0  # gap >= 0.1; llama.cpp vs itself: 0.33 per prompt
FULL_LEVEL = "avx2" if "avx2" in ISA_LEVELS else ISA_LEVELS[-1]  # every prompt at this level


def teacher_forced(d: CDecoder, case: dict) -> tuple[list[tuple[int, float]], float]:
    p = len(case["prompt_ids"])
    logits = d.decode(case["prompt_ids"], 0)
    misses, diffs = [], []
    for i, tok in enumerate(case["ids"]):
        if int(logits.argmax()) != tok:
            misses.append((i, case["gaps"][i]))
        top = np.array(case["top_ids"][i])
        diff = logits[top] - np.array(case["top_logits"][i], dtype=np.float32)
        diffs.append(np.abs(diff - diff.mean()).mean())
        if i + 1 < len(case["ids"]):
            logits = d.decode([tok], p + i)
    return misses, float(np.mean(diffs))


@pytest.mark.parametrize("isa", ISA_LEVELS)
def test_greedy_goldens_at_every_isa_level(smollm2_file, smollm2_goldens, isa):
    cfg = config_from_gguf(smollm2_file)
    cases = smollm2_goldens["cases"]
    if isa != FULL_LEVEL:
        cases = cases[::4] if isa != "ref" else cases[5:6]  # fewer prompts elsewhere (suite time)
    wide = []
    with CDecoder(smollm2_file, cfg, 256, n_threads=2, isa=isa) as d:
        for case in cases:
            misses, mean_diff = teacher_forced(d, case)
            label = f"{isa} {case['kind']} {case['text'][-40:]!r}"
            assert all(gap < GAP_TOLERANCE for _, gap in misses), f"{label}: {misses}"
            assert mean_diff < MEAN_TOP8_TOLERANCE, f"{label}: mean top-8 diff {mean_diff}"
            wide += [(case["text"][-20:], i, g) for i, g in misses if g >= 0.1]
    assert len(wide) <= max(2, MAX_WIDE_DIVERGENCES_PER_PROMPT * len(cases)), wide


def test_free_running_greedy_matches_where_llamacpp_is_confident(smollm2_file, smollm2_goldens):
    """Free-running greedy generation (our own tokens fed back) equals llama.cpp's continuation at
    least up to the first step where llama.cpp's gap is under GAP_TOLERANCE."""
    cfg = config_from_gguf(smollm2_file)
    with CDecoder(smollm2_file, cfg, 256, n_threads=2) as d:
        for case in smollm2_goldens["cases"][6:8]:
            p = len(case["prompt_ids"])
            logits, ours = d.decode(case["prompt_ids"], 0), []
            for i in range(len(case["ids"])):
                ours.append(int(logits.argmax()))
                logits = d.decode([ours[-1]], p + i)
            for i, (a, b) in enumerate(zip(ours, case["ids"])):
                if a != b:
                    assert case["gaps"][i] < GAP_TOLERANCE, (case["text"], i)
                    break


def _free_run(d: CDecoder, prompt_ids: list[int], n: int) -> tuple[np.ndarray, list[int]]:
    """The prompt's logits (one batch) and n greedy tokens, each fed back one per call."""
    logits = d.decode(prompt_ids, 0)
    first, ids = logits.copy(), []
    for i in range(n):
        ids.append(int(logits.argmax()))
        logits = d.decode([ids[-1]], len(prompt_ids) + i)
    return first, ids


def test_every_isa_level_gives_the_same_logits_and_tokens(smollm2_file, smollm2_goldens):
    """The kernels' summation contract end to end (tests/kernels/test_bitexact.py): the prompt's
    logits are equal bit for bit at every level, and so are 64 free-running greedy tokens of every
    golden prompt (the reference level, ~8x slower, on three of them)."""
    cfg = config_from_gguf(smollm2_file)
    runs = {}
    for isa in ISA_LEVELS:
        cases = smollm2_goldens["cases"] if isa != "ref" else smollm2_goldens["cases"][::4]
        with CDecoder(smollm2_file, cfg, 256, n_threads=2, isa=isa) as d:
            runs[isa] = [_free_run(d, c["prompt_ids"], 64) for c in cases]
    best = runs[ISA_LEVELS[-1]]
    for isa in ISA_LEVELS[:-1]:
        step = 1 if isa != "ref" else 4
        for k, (logits, ids) in enumerate(runs[isa]):
            want_logits, want_ids = best[k * step]
            assert np.array_equal(logits.view(np.uint32), want_logits.view(np.uint32)), (isa, k)
            assert ids == want_ids, (isa, k)


def test_the_thread_count_changes_no_bit(smollm2_file):
    """Rows of a product are each one thread's, and a long attention is split by its shape alone:
    1, 2 or 3 threads give the same logits, deep in a context (the split attention) included."""
    cfg = config_from_gguf(smollm2_file)
    ids = [int(t) for t in np.random.default_rng(3).integers(0, cfg.n_vocab, 700)]
    got = []
    for threads in (1, 2, 3):
        with CDecoder(smollm2_file, cfg, 768, n_threads=threads) as d:
            d.decode(ids[:-8], 0)
            got.append([d.decode([t], len(ids) - 8 + i) for i, t in enumerate(ids[-8:])])
    for other in got[1:]:
        for a, b in zip(got[0], other):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("isa", ISA_LEVELS)
def test_llambda_isa_environment_runs_the_whole_engine_at_that_level(smollm2_path, smollm2_goldens, isa):
    """LLAMBDA_ISA lowers every kernel (attention included) for a whole `generate` process; the
    greedy reply follows llama.cpp's up to the first step where its gap is under the tolerance."""
    import json
    import os
    import subprocess
    import sys

    case = smollm2_goldens["cases"][6]  # "1, 2, 3, 4, 5," ... (raw)
    env = dict(os.environ, LLAMBDA_ISA=isa)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.engine.cli",
            "generate",
            str(smollm2_path),
            "--prompt",
            case["text"],
            "--raw",
            "--temperature",
            "0",
            "--max-tokens",
            "24",
            "--threads",
            "2",
            "--ctx",
            "256",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    got = json.loads(out.stdout)
    assert got["prompt_ids"] == case["prompt_ids"]
    assert got["stats"]["isa"].startswith(isa)
    for i, (a, b) in enumerate(zip(got["ids"], case["ids"])):
        if a != b:
            assert case["gaps"][i] < GAP_TOLERANCE, (i, a, b)
            break


def test_a_seed_gives_the_same_reply_at_any_level_and_thread_count(smollm2_path):
    """The README's promise end to end: `llambda generate` with sampling on and a seed, run with
    the kernels at another level and another thread count, writes the same reply."""
    import json
    import os
    import subprocess
    import sys

    replies = set()
    for isa, threads in ((ISA_LEVELS[-1], 2), ("avx2" if "avx2" in ISA_LEVELS else "ref", 1)):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "app.engine.cli",
                "generate",
                str(smollm2_path),
                "--prompt",
                "Tell me about the sea.",
                "--temperature",
                "0.9",
                "--top-k",
                "50",
                "--seed",
                "7",
                "--max-tokens",
                "48",
                "--threads",
                str(threads),
                "--ctx",
                "256",
                "--json",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            env=dict(os.environ, LLAMBDA_ISA=isa),
        )
        got = json.loads(out.stdout)
        assert got["stats"]["isa"].startswith(isa) and got["stats"]["threads"] == threads
        replies.add((tuple(got["ids"]), got["text"]))
    assert len(replies) == 1
