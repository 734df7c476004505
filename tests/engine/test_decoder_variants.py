"""SmolLM2 in eleven other tensor types (made by llama.cpp's own quantizer from the Q4_1 file by
scripts/make_engine_goldens.py variants; cached beside it under variants/, checked by SHA-256)
against llama.cpp's greedy continuations (one prompt per type in the suite; six in the golden
file, for `scripts/check_vs_llamacpp.py`-style runs by hand), teacher-forced as in test_decoder_smollm2.py and with
the same gap tolerance (llama.cpp's own batch-vs-one-by-one noise floor).

The variant files are ~100 MB each and need llama.cpp to make, so the suite does not make them:
.ci/run does (scripts/make_test_variants.py); a missing file fails its test with that command.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from app.engine.decoder import CDecoder
from app.gguf import open_gguf
from app.model import config_from_gguf
from tests.engine.conftest import DATA, ISA_LEVELS
from tests.engine.test_decoder_smollm2 import GAP_TOLERANCE, MEAN_TOP8_TOLERANCE, _free_run, teacher_forced

GOLDEN = DATA / "smollm2_variants.json"
VARIANTS = json.loads(GOLDEN.read_text())["variants"] if GOLDEN.exists() else []
MEAN_TOP4_TOLERANCE = MEAN_TOP8_TOLERANCE  # measured 0.08..0.12 (F16: 0.002, BF16: 0.013)


def _variant_path(v: dict) -> Path:
    base = Path(os.environ.get("LLAMBDA_TEST_CACHE") or Path.home() / ".cache" / "llambda-test")
    return base / "variants" / v["file"]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v["type"])
def test_variant_greedy_goldens(variant):
    path = _variant_path(variant)
    how = (
        "make it with scripts/make_test_variants.py, run by a Python that has "
        "llama-cpp-python==0.3.36 (.ci/run does this)"
    )
    if not path.exists():
        pytest.fail(f"{path} missing; {how}", pytrace=False)
    if path.stat().st_size != variant["size"]:  # (full SHA-256 checked when the file is made;
        pytest.fail(
            f"{path} differs from the file the goldens were made from; {how}",  # hashing
            pytrace=False,
        )  # 1.5 GB costs 5 s)
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        with CDecoder(f, cfg, 256, n_threads=2) as d:
            k = VARIANTS.index(variant) % 2  # raw and chat prompts alternate
            for case in variant["cases"][3 * k : 3 * k + 1]:
                misses, mean_diff = teacher_forced(d, case)
                label = f"{variant['type']} {case['text'][-30:]!r}"
                assert all(g < GAP_TOLERANCE for _, g in misses), f"{label}: {misses}"
                assert mean_diff < MEAN_TOP4_TOLERANCE, f"{label}: {mean_diff}"


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v["type"])
def test_variant_is_the_same_at_every_isa_level(variant):
    """The summation contract per tensor type, end to end: a prompt's logits and 16 free-running
    greedy tokens are equal bit for bit at every level."""
    path = _variant_path(variant)
    if not path.exists():
        pytest.fail(f"{path} missing; make it with scripts/make_test_variants.py", pytrace=False)
    case = variant["cases"][1]
    runs = []
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        for isa in ISA_LEVELS:
            with CDecoder(f, cfg, 256, n_threads=2, isa=isa) as d:
                runs.append((isa, *_free_run(d, case["prompt_ids"], 16 if isa != "ref" else 4)))
    _, want_logits, want_ids = runs[-1]
    for isa, logits, ids in runs[:-1]:
        assert np.array_equal(logits.view(np.uint32), want_logits.view(np.uint32)), isa
        assert ids == want_ids[: len(ids)], isa
