"""KV cache types per session (f16, q8_0, f32) and the context the engine picks by itself: the
memory estimate and `inspect` use the KV type, and the decoder allocates what they say; the
default context is the training length capped by what the estimate says fits."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.engine import Engine
from app.gguf import open_gguf
from app.library.preflight import fitting_context
from app.model import estimate_memory
from app.library.inspect import describe


@pytest.mark.parametrize("kv_type", ["f16", "q8_0", "f32"])
def test_the_estimate_is_what_the_decoder_allocates(smollm2_path, kv_type):
    with Engine(smollm2_path, n_ctx=1024, n_threads=1, kv_type=kv_type) as eng, open_gguf(smollm2_path) as f:
        assert eng.decoder.kv_bytes == estimate_memory(f, 1024, kv_type=kv_type).kv_cache_bytes


def test_q8_0_halves_the_kv_cache_in_inspect(smollm2_path):
    f16 = describe(smollm2_path, n_ctx=4096)["memory"]
    q8 = describe(smollm2_path, n_ctx=4096, kv_type="q8_0")["memory"]
    assert q8["kv_type"] == "q8_0" and q8["kv_cache"] * 64 == f16["kv_cache"] * 34


def test_q8_0_cache_follows_f16_closely(smollm2_path):
    """The 8-bit cache changes the logits a little, not a lot (tests/kernels/test_kv_q8.py holds
    its attention kernels to the reference bit for bit)."""
    text = "The quick brown fox jumps over the lazy dog. " * 4
    out = {}
    for kv_type in ("f16", "q8_0"):
        with Engine(smollm2_path, n_ctx=128, n_threads=2, kv_type=kv_type) as eng:
            out[kv_type] = eng.decoder.decode(eng.raw_prompt(text), 0, all_logits=True)
    ref, q8 = out["f16"], out["q8_0"]
    assert not np.array_equal(ref, q8)
    assert (q8.argmax(1) == ref.argmax(1)).mean() > 0.9
    lp = ref - ref.max(1, keepdims=True)
    lp -= np.log(np.exp(lp).sum(1, keepdims=True))
    lq = q8 - q8.max(1, keepdims=True)
    lq -= np.log(np.exp(lq).sum(1, keepdims=True))
    kld = (np.exp(lp) * (lp - lq)).sum(1).mean()
    assert 0 < kld < 0.02


def test_a_q8_0_cache_needs_head_sizes_in_blocks_of_32(tmp_path):
    from tests.synth import TinySpec, write_tiny_model

    path = write_tiny_model(tmp_path / "t.gguf", TinySpec(), seed=1)
    with open_gguf(path) as f:
        from app.model import config_from_gguf

        hd = config_from_gguf(f).head_dim
    assert hd == 16
    with pytest.raises(ValueError, match="multiple of 32"):
        Engine(path, n_ctx=64, kv_type="q8_0")


def test_default_context_is_the_training_length_capped_by_memory(smollm2_path):
    with open_gguf(smollm2_path) as f:
        train = 8192
        n, why = fitting_context(f, "f16", available_bytes=64 << 30)
        assert n == train and "training length" in why
        # little memory: the largest multiple of 256 whose estimate fits in 80% of it
        weights = estimate_memory(f, 256).weights_bytes
        avail = int((weights + estimate_memory(f, 3000).kv_cache_bytes) / 0.8) + (64 << 20)
        n16, why16 = fitting_context(f, "f16", available_bytes=avail)
        n8, _ = fitting_context(f, "q8_0", available_bytes=avail)
        assert n16 % 256 == 0 and 256 <= n16 < train and "fits" in why16
        assert estimate_memory(f, n16).total_bytes <= 0.8 * avail < estimate_memory(f, n16 + 256).total_bytes
        assert n8 > n16  # the 8-bit cache fits a longer context
