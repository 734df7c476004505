"""The decoder's architecture switches against the numpy reference on synthetic models:
QKV biases (qwen2 layout), QK-norm (qwen3), post-norms + GeGLU + soft-caps + sliding window on
alternate layers + embedding scale (gemma2), NeoX RoPE (all three). KV cache f32; tolerance
max |diff| < 1e-3 on logits of magnitude ~10 (only summation order differs).

These pin the C code paths that the next architectures need; whether the config table maps each
architecture's GGUF metadata exactly as llama.cpp does is for the test that runs a real file.
"""
from __future__ import annotations

import numpy as np
import pytest

from app.engine.decoder import CDecoder, layer_window
from app.gguf import open_gguf
from app.model import config_from_gguf
from tests.engine.synth_arch import write_arch_model
from tests.reference.forward import ReferenceModel


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma2"])
def test_switches_match_reference(arch, tmp_path):
    path = write_arch_model(tmp_path / f"{arch}.gguf", arch, seed=3, tied=arch == "gemma2")
    tokens = list(np.random.default_rng(1).integers(0, 300, 16))
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        with CDecoder(f, cfg, 32, kv_type="f32", n_threads=2) as d:
            got = d.decode(tokens, 0, all_logits=True)
            # and split across calls (the window and caps do not depend on batching)
            first = d.decode(tokens[:9], 0, all_logits=True)
            rest = d.decode(tokens[9:], 9, all_logits=True)
    ref = ReferenceModel(path).forward(tokens)
    scale = np.abs(ref).max()
    assert np.abs(got - ref).max() < 1e-3 * max(1.0, scale / 10), (np.abs(got - ref).max(), scale)
    np.testing.assert_allclose(np.concatenate([first, rest]), got, atol=1e-4)
    if arch == "gemma2":
        assert cfg.sliding_window == 5 and [layer_window(cfg, i) for i in range(3)] == [5, 0, 5]
        assert np.abs(got).max() <= cfg.final_softcap


def test_a_tensor_of_the_wrong_shape_is_named(tmp_path):
    """A file whose attn_k rows disagree with head_count_kv: a one-line ModelFormatError naming
    the tensor, before the C decoder sees it."""
    from app.errors import ModelFormatError
    from tests.synth import TinySpec, write_tiny_model

    path = write_tiny_model(tmp_path / "bad.gguf", TinySpec(n_head_kv=2), seed=1,
                            extra_metadata={"llama.attention.head_count_kv": 1})
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        with pytest.raises(ModelFormatError, match=r"blk\.0\.attn_k\.weight"):
            CDecoder(f, cfg, 16, n_threads=1)
