"""The fidelity guard: every tensor type and architecture the tests carry, at every kernel level
this CPU has, measured the way `llambda perplexity --kl-divergence` measures, against llama.cpp.

The oracle: llama.cpp's base files (tests/data/perplexity/llamacpp/, scripts/make_kld_goldens.py)
of SmolLM2-135M-Instruct Q4_1, its eleven variants (tests/data/engine/smollm2_variants.json) and
Gemma 3 270M Q4_K_M, on tests/data/perplexity/fidelity_text.txt (2,490 SmolLM2 tokens of prose
and Python; 4 chunks of 512, 1,020 scored positions) decoded by llama.cpp at batch 512; and
llama.cpp's own noise floor (llamacpp_floor.json): the same ids decoded one token at a time
against its batch-512 base -- the same weights, only the summation order differs.

Criteria, per model and level, over the positions the test scores (SE: the standard error of our
figure over those positions; a bound tighter than 3 SE would judge the text, not the engine):
- mean KLD(llama.cpp || ours) <= 1.25 x llama.cpp's floor mean over the same positions (+ 3 SE);
- top-1 agreement >= llama.cpp's own (batch 1 against batch 512) minus 1 point (or 3 SE);
- perplexity ratio within 0.5% of 1, or 1.25 x llama.cpp's own deviation, or 3 SE, the largest
  (Gemma is held to 1%, see PPL_RATIO_TOL_BY_MODEL).

Positions: the best level (AVX2 here) scores every position of the 4 chunks. The reference
kernels are ~30x slower, so the other levels run the short base instead -- one chunk of 64
tokens, 31 scored positions, made the same way -- and their logits must also equal the best
level's bit for bit on that chunk (the summation contract, stronger than any tolerance). In the
default run that is done for Q4_1 and Gemma; the variants' other levels are behind `slow`.

Measured (AMD EPYC Zen 3, AVX2 without AVX-512; KLDs by the top-32 estimator of the base files,
which reads ~80% of the full-vocabulary KLD, the same way on both sides of each ratio), AVX2 over
1,020 positions, KLD as a multiple of llama.cpp's floor, top-1 (llama.cpp's own), PPL ratio
(llama.cpp's own):

| model | KLD x floor | top-1 | PPL ratio |
| --- | --- | --- | --- |
| Q4_1 | 1.01 | 96.6% (96.6%) | 1.0039 (1.0034) |
| Q4_0 | 1.05 | 94.4% (93.8%) | 0.9931 (0.9984) |
| Q5_0 | 1.05 | 96.1% (95.6%) | 0.9996 (1.0011) |
| Q8_0 | 1.06 | 96.2% (96.5%) | 0.9960 (1.0015) |
| Q2_K | 1.03 | 93.5% (93.0%) | 1.0001 (1.0038) |
| Q3_K_M | 1.09 | 95.5% (93.8%) | 1.0037 (1.0047) |
| Q4_K_M | 0.99 | 96.0% (96.7%) | 1.0091 (1.0008) |
| Q5_K_M | 1.06 | 95.0% (95.6%) | 1.0049 (1.0018) |
| Q6_K | 1.10 | 94.7% (96.5%) | 1.0075 (1.0000) |
| IQ4_NL | 0.99 | 96.5% (96.0%) | 0.9995 (1.0013) |
| F16 | 0.75 | 99.9% (99.8%) | 1.0000 (1.0000) |
| BF16 | 0.68 | 99.1% (99.0%) | 0.9997 (0.9999) |
| Gemma 3 270M | 1.19 | 95.1% (94.3%) | 1.0071 (1.0024) |

The PPL ratio's SE is paired: the standard error of the per-position differences of the two
engines' log-probabilities of the same token (0.28-0.44% over these positions, where each
perplexity's own SE is ~9%: the text's difficulty cancels). Their autocorrelation within a
chunk is < 0.05 at lags 1-8, so positions count as independent. Four models are past 0.5%:
Q4_0 (z = -2.3), Q4_K_M (+2.6), Q6_K (+2.2), Gemma (+1.6); Q6_K's top-1 is 1.8 points under
llama.cpp's own (2.5 SE). Measured on 2026-12-02 (branch fidelity), these are the noise of
this text and not a difference in how we compute:
- on another text (README.md + docs/*.md, 12 chunks, 3,060 positions, SE 0.19-0.22%) Q6_K's
  ratio is 0.9981 (z -0.85) and Q4_0's 1.0012 (z +0.63), both signs flipped, and Q4_K_M's
  1.0044 (z +2.0, half the gap);
- the two engines' distributions have the same sharpness: the weighted slope of our top-32
  log-probabilities on llama.cpp's is 0.9991 +- 0.0011 (Q6_K), 0.9998 +- 0.0014 (Q4_K_M),
  1.0005 +- 0.0009 (Q4_0): a logit-scale (temperature) difference of 0.1% moves the PPL ratio
  by ~0.05%, not by 0.9%;
- activation quantization per weight type is llama.cpp's (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1
  for Q4_1/Q5_1, Q8_K for the K-quants and IQ types; same amax/127 scale, ties to even, same
  block sums); the differences are in float rounding only (llama.cpp stores the Q8_0/Q8_1
  activation scales as float16, ours as float32; its RoPE angles are float products, ours
  double), which are not biased in one direction.
Over the 11 quantized SmolLM2 models the sum of z^2 is 26 for ours against llama.cpp (11
expected) and 6 for llama.cpp's batch 1 against batch 512: another engine's rounding moves a
1,020-position ratio ~1.5x further than its paired SE says. So the bound stays at 3 paired SE
(~2 sigma of that measured spread), with 0.5% as its floor. A 2 SE bound would be ~1.3 sigma:
13 models would fail it most of the time on rounding alone, and it would fail Q6_K today,
whose gap does not reproduce on other text.

The guard fails a wrong kernel: the Q4_1 AVX2 dot product with each block's min scaled by 1.01
gave KLD 0.0334 (x12.4), top-1 87.2%, PPL ratio 1.041 (tried once, reverted).

A missing model file fails with the command that makes it (.ci/run does); it never skips. A level
the CPU lacks (avx512 here) is not collected.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.engine import perplexity as P
from app.engine.decoder import CDecoder
from app.gguf import open_gguf
from app.model import config_from_gguf
from app.text import load_tokenizer
from tests.engine.conftest import ISA_LEVELS

DATA = Path(__file__).resolve().parent.parent / "data" / "perplexity"
FLOORS = json.loads((DATA / "llamacpp_floor.json").read_text())
MODELS = list(FLOORS["models"])
TEXT = (DATA / FLOORS["text"]).read_text(encoding="utf-8")
BEST = ISA_LEVELS[-1]
KLD_FACTOR = 1.25
TOP1_SLACK = 0.01
PPL_RATIO_TOL = 0.005
# Gemma 3 270M over 1,020 positions: ours 1.0071 (the ratio's standard error ~0.3%; llama.cpp's
# own batch 1 against 512: 1.0024, with KLD x1.19 and top-1 above llama.cpp's own): past 0.5%
# by two tenths of a point, within the noise of the ratio; held to 1% so it cannot drift further.
PPL_RATIO_TOL_BY_MODEL = {"gemma3": 0.01}
SE_WIDTH = 3.0


def _model_path(name: str) -> Path:
    from tests.models import cache_dir, require_smollm2

    if name == "Q4_1":
        return require_smollm2()
    if name == "gemma3":
        from tests.engine.test_decoder_gemma3 import fetch_gemma3

        try:
            return fetch_gemma3()
        except Exception as e:
            pytest.fail(str(e), pytrace=False)
    path = cache_dir() / "variants" / FLOORS["models"][name]["file"]
    if not path.exists():
        pytest.fail(
            f"{path} missing; make it with scripts/make_test_variants.py, run by a Python "
            "that has llama-cpp-python==0.3.36 (.ci/run does this)",
            pytrace=False,
        )
    return path


def _measure(f, cfg, tok, base: P.BaseFile, isa: str, keep_logits: bool = False):
    ids = tok.encode(TEXT, add_special=True, parse_special=False)
    plan = P.make_plan(ids, int(base.header["n_ctx"]), tok.bos_id if tok.add_bos else None, base.n_chunks)
    base.check_against(plan, cfg.n_vocab)  # our tokenizer gave llama.cpp's ids
    with CDecoder(f, cfg, plan.n_ctx, n_threads=2, isa=isa) as d:
        scores = list(P.score_chunks(d, plan, base=base))
        logits = d.decode(plan.chunks[0], 0, all_logits=True) if keep_logits else None
    return P.kld_against(base, scores), logits


def _floor(entry: dict, base: P.BaseFile) -> dict:
    kld = np.array(entry["kld"])
    top1 = np.array([c == "1" for c in entry["top1"]])
    ratio = float(np.exp(np.mean(base.target_logprob.astype(np.float64) - np.array(entry["target_logprob"]))))
    return {"kld": float(kld.mean()), "top1": float(top1.mean()), "ppl_ratio": ratio}


def _check(label: str, ours: P.Summary, floor: dict, factor: float = KLD_FACTOR, ppl_tol: float = PPL_RATIO_TOL) -> str:
    """The criteria, each widened by the sampling error of the positions measured (SE_WIDTH
    standard errors) where that is the larger: a bound tighter than the measurement's own noise
    would fail on the text chosen, not on the engine."""
    kld_bound = factor * floor["kld"] + SE_WIDTH * ours.kld_se
    top1_bound = floor["top1"] - max(TOP1_SLACK, SE_WIDTH * ours.top1_se)
    ppl_bound = max(ppl_tol, factor * abs(floor["ppl_ratio"] - 1), SE_WIDTH * ours.ppl_ratio_se)
    figures = (
        f"{label}: KLD {ours.kld_mean:.5f} (llama.cpp floor {floor['kld']:.5f}, "
        f"x{ours.kld_mean / floor['kld']:.2f}; bound {kld_bound:.5f}), top-1 "
        f"{100 * ours.top1:.1f}% (floor {100 * floor['top1']:.1f}%; bound "
        f"{100 * top1_bound:.1f}%), PPL ratio {ours.ppl_ratio:.4f} (llama.cpp's own "
        f"{floor['ppl_ratio']:.4f}; bound 1 +- {ppl_bound:.4f})"
    )
    print(figures)
    assert ours.kld_mean <= kld_bound, figures
    assert ours.top1 >= top1_bound, figures
    assert abs(ours.ppl_ratio - 1) <= ppl_bound, figures
    return figures


@pytest.fixture(scope="module", params=MODELS)
def model(request):
    name = request.param
    f = open_gguf(_model_path(name))
    yield name, f, config_from_gguf(f), load_tokenizer(f)
    f.close()


def test_fidelity_at_the_best_level(model):
    """Every scored position of the 4 chunks, at the best kernel level this CPU has."""
    name, f, cfg, tok = model
    base = P.read_base(str(DATA / "llamacpp" / f"{name}.bin"))
    ours, _ = _measure(f, cfg, tok, base, BEST)
    assert ours.n_positions == FLOORS["models"][name]["n_positions"]
    _check(
        f"{name} {BEST}",
        ours,
        _floor(FLOORS["models"][name], base),
        ppl_tol=PPL_RATIO_TOL_BY_MODEL.get(name, PPL_RATIO_TOL),
    )


# The other levels' runs of the variants are behind `slow` (~3 minutes of reference kernels):
# the default run holds them through the bit-identical kernel tests (tests/kernels) and these two.
QUICK_OTHER_LEVELS = ("Q4_1", "gemma3")


@pytest.mark.parametrize("isa", [i for i in ISA_LEVELS if i != BEST])
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=() if n in QUICK_OTHER_LEVELS else pytest.mark.slow) for n in MODELS]
)
def test_fidelity_at_the_other_levels(name, isa):
    """The short base (one chunk of 64) at each other level, held to the same criteria, and its
    logits equal to the best level's bit for bit."""
    with open_gguf(_model_path(name)) as f:
        cfg, tok = config_from_gguf(f), load_tokenizer(f)
        base = P.read_base(str(DATA / "llamacpp" / f"{name}.short.bin"))
        ours, logits = _measure(f, cfg, tok, base, isa, keep_logits=True)
        _, want = _measure(f, cfg, tok, base, BEST, keep_logits=True)
    assert np.array_equal(logits.view(np.uint32), want.view(np.uint32)), f"{name}: {isa} != {BEST}"
    _check(f"{name} {isa} (short)", ours, _floor(FLOORS["models"][name]["short"], base))


ORDER = ["Q8_0", "Q6_K", "Q4_K_M", "Q3_K_M", "Q2_K"]


def _variant_file(name: str) -> Path:
    from tests.models import cache_dir

    variants = json.loads((DATA.parent / "engine" / "smollm2_variants.json").read_text())["variants"]
    path = cache_dir() / "variants" / next(v["file"] for v in variants if v["type"] == name)
    if not path.exists():
        pytest.fail(
            f"{path} missing; make it with scripts/make_test_variants.py, run by a Python "
            "that has llama-cpp-python==0.3.36 (.ci/run does this)",
            pytrace=False,
        )
    return path


def test_quantizations_rank_as_expected_against_an_f16_base(tmp_path):
    """What a user does with `--kl-divergence`: a base saved from the F16 file (through the base
    file format), each quantization measured against it on one chunk (255 positions): the KLD
    orders them by their bits, Q8_0 < Q6_K < Q4_K_M < Q3_K_M < Q2_K."""

    def run(name, base=None, k=0):
        with open_gguf(_variant_file(name)) as f:
            cfg, tok = config_from_gguf(f), load_tokenizer(f)
            ids = tok.encode(TEXT, add_special=True, parse_special=False)
            plan = P.make_plan(ids, 512, tok.bos_id if tok.add_bos else None, 1)
            with CDecoder(f, cfg, plan.n_ctx, n_threads=2, isa=BEST) as d:
                return plan, cfg, list(P.score_chunks(d, plan, k=k, base=base))

    plan, cfg, scores = run("F16", k=P.TOP_K)
    P.write_base(
        str(tmp_path / "f16.bin"), plan, scores, cfg.n_vocab, "", {"file": "F16"}, {"file": "fidelity_text.txt"}, "test"
    )
    base = P.read_base(str(tmp_path / "f16.bin"))
    kld = {name: P.kld_against(base, run(name, base)[2]).kld_mean for name in ORDER}
    print("KLD against F16:", {k: round(v, 5) for k, v in kld.items()})
    assert [kld[n] for n in ORDER] == sorted(kld.values()), kld
