"""The C decoder against the numpy reference and llama.cpp's logits on synthetic F32 models.

Tolerances (logits of magnitude up to ~30): KV cache f32: max |diff| < 1e-3 against both the
reference and llama.cpp (measured ~4e-5: only summation order differs); KL(llama.cpp || ours) of
every position's next-token distribution < 1e-9 nats (the figure `llambda perplexity` reports). KV cache f16 against the
reference with K/V rounded to float16 the same way: < 2e-2 (measured ~4e-3).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.engine.decoder import CDecoder
from app.engine.perplexity import kl_divergence_rows
from app.gguf import open_gguf
from app.model import config_from_gguf
from tests.engine.conftest import DATA, ISA_LEVELS
from tests.reference.forward import ReferenceModel
from tests.synth import TinySpec, write_tiny_model

CASES = json.loads((DATA / "synth_logits.json").read_text())["models"]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c["name"])
def synth(request, tmp_path_factory):
    c = request.param
    path = write_tiny_model(tmp_path_factory.mktemp("m") / "m.gguf", TinySpec(**c["spec"]), seed=c["seed"])
    f = open_gguf(path)
    yield c, path, f, config_from_gguf(f)
    f.close()


@pytest.mark.parametrize("isa", ISA_LEVELS)
def test_f32_cache_matches_reference_and_llamacpp(synth, isa):
    c, path, f, cfg = synth
    with CDecoder(f, cfg, 64, kv_type="f32", n_threads=2, isa=isa) as d:
        got = d.decode(c["tokens"], 0, all_logits=True)
    ref = ReferenceModel(path).forward(c["tokens"])
    gold = np.array(c["logits"], dtype=np.float32)
    assert np.abs(got - ref).max() < 1e-3
    assert np.abs(got - gold).max() < 1e-3
    assert (got.argmax(-1) == gold.argmax(-1)).all()
    kld = kl_divergence_rows(gold, got)  # the fidelity figure of `llambda perplexity`
    print(f"{c['name']} {isa}: KLD vs llama.cpp mean {kld.mean():.3g} max {kld.max():.3g}")
    assert kld.max() < 1e-9, kld.max()


def test_f16_cache_matches_reference_with_f16_kv(synth):
    c, path, f, cfg = synth
    with CDecoder(f, cfg, 64, kv_type="f16", n_threads=2) as d:
        got = d.decode(c["tokens"], 0, all_logits=True)
    ref = ReferenceModel(path, kv_f16=True).forward(c["tokens"])
    assert np.abs(got - ref).max() < 2e-2


@pytest.mark.parametrize("kv_type", ["f16", "f32"])
def test_incremental_and_split_batches_agree_with_one_batch(synth, kv_type):
    """Logits do not depend on how the tokens were cut into calls: one call, one token per call,
    and batches split by a small n_batch inside C give the same numbers (up to 1e-4)."""
    c, path, f, cfg = synth
    toks = c["tokens"]
    with CDecoder(f, cfg, 64, kv_type=kv_type, n_threads=2) as d:
        whole = d.decode(toks, 0, all_logits=True)
        last = d.decode(toks, 0)
        step = np.stack([d.decode([t], i) for i, t in enumerate(toks)])
        first = d.decode(toks[:7], 0, all_logits=True)
        rest = d.decode(toks[7:], 7, all_logits=True)
    with CDecoder(f, cfg, 64, kv_type=kv_type, n_threads=1, n_batch=3) as d:
        split = d.decode(toks, 0, all_logits=True)
    np.testing.assert_allclose(last, whole[-1], atol=1e-4)
    np.testing.assert_allclose(step, whole, atol=1e-4)
    np.testing.assert_allclose(np.concatenate([first, rest]), whole, atol=1e-4)
    np.testing.assert_allclose(split, whole, atol=1e-4)


def test_decode_rejects_bad_input(synth):
    c, path, f, cfg = synth
    with CDecoder(f, cfg, 16, n_threads=1) as d:
        with pytest.raises(ValueError):
            d.decode([], 0)
        with pytest.raises(ValueError):
            d.decode([cfg.n_vocab], 0)
        with pytest.raises(ValueError):
            d.decode([-1], 0)
        with pytest.raises(ValueError):
            d.decode([1] * 17, 0)
        with pytest.raises(ValueError):
            d.decode([1], 16)
        assert d.kv_bytes == 2 * cfg.n_layer * 16 * cfg.n_head_kv * cfg.head_dim * 2


def test_pool_jobs_per_generated_token(smollm2_file):
    """One generated token of a 30-layer model wakes the pool 4 times per layer (Q/K/V together,
    the attention output, gate/up together, down; short attention runs on the caller) plus the
    output projection: 121 barriers, a count rather than a time."""
    cfg = config_from_gguf(smollm2_file)
    with CDecoder(smollm2_file, cfg, 256, n_threads=2) as d:
        d.decode(list(range(100, 150)), 0)
        before = d.pool.jobs
        d.decode([5], 50)
        assert d.pool.jobs - before == 4 * cfg.n_layer + 1
