"""Each architecture the engine runs, on its seeded synthetic model (tests/engine/synth_arch.py),
against llama.cpp (tests/data/engine/arch_goldens.json, made by scripts/make_engine_goldens.py
archs) and the numpy reference: qwen2 (QKV biases), qwen3 (QK-norm), a Mistral/Llama-3.1-style
llama file (sliding_window key that llama.cpp ignores, rope_freqs divisors), gemma2 (post-norms,
GeGLU, soft-caps, alternate sliding-window layers, embedding scale; gemma: GeGLU and embedding
scale alone; and at 27B's 46 layers, queries scaled by 1/sqrt(n_embd / n_head)), gemma3 (QK-norm, 5 local
layers to 1 global, local RoPE base 10000, head_dim 24 != n_embd / n_head), phi3 (fused QKV and
gate/up, 8 of 16 head dims rotated, LongRoPE short factors within the original context and long
ones past it, attention factor 1.1), RoPE scaling from the rope.scaling.* keys: linear (llama,
factor 4) and YaRN as Qwen2.5 sets it (factor 4 over an original context of 128; qwen2 in NeoX
order, llama in normal order). Context 512 positions, as llama.cpp ran them. (A wrong scaling is
far outside the bounds below: no scaling on the linear model, KLD 1.7; YaRN taken as linear, 0.94;
YaRN with the original context 512 instead of 128, 0.035.)

All weights F32, KV cache f32 on both sides, so only summation order differs. Tolerances:
- prompt logits (12 positions, one batch) vs llama.cpp: max |diff| < 2e-3 for the SiLU
  architectures (logits of magnitude ~1..30); < 5e-3 for the GELU ones (gemma/2/3: measured
  2.3e-3 and 1.6e-3 with the numpy reference just as far, because ggml's CPU GELU rounds its input
  to float16 and reads a table, where ours and the reference compute tanh in float32); < 1.5e-2
  for the 46-layer gemma2 (the same noise over 15 times the layers: measured 6.5e-3; a wrong query
  scale would be off by ~1);
- the same as the fidelity figure of `llambda perplexity`, KL(llama.cpp || ours) of the
  next-token distribution at each prompt position (printed with -s): < 1e-9 nats for the SiLU
  architectures (measured 4e-12..1.1e-11), < 1e-5 for the GELU ones (measured means 6e-8..1.1e-7,
  max 2.2e-6 for the 46-layer gemma2); a quantized model's noise floor is ~4e-3;
- the same vs the numpy reference: max |diff| < 1e-3;
- 32 greedy tokens, one decode call each as generation runs: equal to llama.cpp's, token for
  token (llama.cpp's smallest top-two gap on these runs is 0.0014, qwen2_yarn's; above the
  noise of 1e-4).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.engine.decoder import CDecoder, layer_rope_base, layer_window
from app.engine.perplexity import kl_divergence_rows
from app.gguf import open_gguf
from app.model import ARCHITECTURES, config_from_gguf
from tests.engine.conftest import DATA
from tests.engine.synth_arch import FEATURES, write_arch_model
from tests.reference.forward import ReferenceModel

GOLDENS = json.loads((DATA / "arch_goldens.json").read_text())
LLAMACPP_ATOL = {"silu": 2e-3, "gelu": 5e-3}
LLAMACPP_KLD_MAX = {"silu": 1e-9, "gelu": 1e-5}  # KL(llama.cpp || ours), nats; see above
REFERENCE_ATOL = 1e-3


@pytest.fixture(scope="module")
def arch_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("archs")
    return {name: write_arch_model(d / f"{name}.gguf", name, seed=GOLDENS["seed"]) for name in GOLDENS["models"]}


@pytest.mark.parametrize("name", list(GOLDENS["models"]))
def test_matches_llamacpp_and_reference(name, arch_files):
    gold = GOLDENS["models"][name]
    path = arch_files[name]
    prompt = gold["prompt"]
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        assert cfg.spec.runnable, f"{cfg.arch} proven here but not marked runnable"
        with CDecoder(f, cfg, GOLDENS["n_ctx"], kv_type="f32", n_threads=2) as d:
            got = d.decode(prompt, 0, all_logits=True)
            ids = []
            logits = got[-1]
            for step in range(GOLDENS["n_gen"]):
                ids.append(int(np.argmax(logits)))
                logits = d.decode([ids[-1]], len(prompt) + step)
    want = np.array(gold["logits"], np.float32)
    atol = 1.5e-2 if cfg.n_layer > 8 else LLAMACPP_ATOL[cfg.spec.activation]
    # the fidelity figure of `llambda perplexity`: KL(llama.cpp || ours) per prompt position
    kld = kl_divergence_rows(want, got)
    print(
        f"{name}: KLD vs llama.cpp mean {kld.mean():.3g} max {kld.max():.3g}, "
        f"max |logit diff| {np.abs(got - want).max():.3g}"
    )
    assert kld.max() < LLAMACPP_KLD_MAX[cfg.spec.activation], (kld.mean(), kld.max())
    assert np.abs(got - want).max() < atol, np.abs(got - want).max()
    assert ids == gold["greedy"]
    ref = ReferenceModel(path, n_ctx=GOLDENS["n_ctx"]).forward(prompt)
    assert np.abs(got - ref).max() < REFERENCE_ATOL, np.abs(got - ref).max()


def test_layer_patterns_as_llamacpp_reads_them(arch_files):
    with open_gguf(arch_files["gemma2"]) as f:
        g2 = config_from_gguf(f)
    assert [layer_window(g2, i) for i in range(3)] == [5, 0, 5] and g2.tied_output
    with open_gguf(arch_files["gemma2_46"]) as f:
        assert config_from_gguf(f).attn_scale == pytest.approx(16**-0.5)
    with open_gguf(arch_files["gemma3"]) as f:
        g3 = config_from_gguf(f)
    assert [layer_window(g3, i) for i in range(7)] == [4, 4, 4, 4, 4, 0, 4]
    assert [layer_rope_base(g3, i) for i in (0, 5)] == [10000.0, 0.0] and g3.rope_base == 1e6
    with open_gguf(arch_files["llama_variant"]) as f:
        lv = config_from_gguf(f)
    assert lv.sliding_window == 0 and lv.rope_freqs  # llama.cpp ignores llama's sliding_window
    for name, n_ctx, which in (
        ("phi3", 512, "short"),
        ("phi3", 4097, "long"),
        ("phi3_long", 256, "short"),
        ("phi3_long", 257, "long"),
    ):
        with open_gguf(arch_files[name]) as f:
            with CDecoder(f, config_from_gguf(f), n_ctx, n_threads=1) as d:
                assert d.rope_factors == which, (name, n_ctx)


@pytest.mark.parametrize(
    "pattern, windows",
    [
        (3, [4, 4, 0, 4, 4, 0, 4]),
        ([True, False, True, False, True, False, True], [4, 0, 4, 0, 4, 0, 4]),
    ],
)
def test_a_files_sliding_window_pattern_overrides_the_architectures(pattern, windows, tmp_path):
    path = write_arch_model(tmp_path / "p.gguf", "gemma3", swa_pattern=pattern)
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
    assert [layer_window(cfg, i) for i in range(7)] == windows


def test_every_runnable_architecture_is_proven_here():
    proven = {FEATURES[n].get("arch", n) for n in GOLDENS["models"]} | {"llama"}
    assert {a for a, s in ARCHITECTURES.items() if s.runnable} <= proven


def test_a_tensor_of_the_wrong_shape_is_named(tmp_path):
    """A file whose attn_k rows disagree with head_count_kv: a one-line ModelFormatError naming
    the tensor, before the C decoder sees it."""
    from app.errors import ModelFormatError
    from tests.synth import TinySpec, write_tiny_model

    path = write_tiny_model(
        tmp_path / "bad.gguf", TinySpec(n_head_kv=2), seed=1, extra_metadata={"llama.attention.head_count_kv": 1}
    )
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        with pytest.raises(ModelFormatError, match=r"blk\.0\.attn_k\.weight"):
            CDecoder(f, cfg, 16, n_threads=1)


@pytest.mark.parametrize("name", ["gemma3", "phi3", "llama_variant", "llama_linear"])
def test_kv_shift_equals_decoding_the_shorter_sequence(name, tmp_path):
    """Dropping cache positions re-rotates the later keys: a local layer's own RoPE base (gemma3),
    frequency divisors, and LongRoPE's attention factor (applied once, not again). One layer, so
    that a key depends on its token and position alone and the shifted cache must equal a fresh
    decode of the sequence without the dropped tokens; f32 cache, max |diff| < 1e-4."""
    path = write_arch_model(tmp_path / "one.gguf", name, seed=4, n_layer=1)
    tokens = list(np.random.default_rng(5).integers(3, 200, 20))
    keep = tokens[:2] + tokens[6:]
    with open_gguf(path) as f:
        cfg = config_from_gguf(f)
        with CDecoder(f, cfg, 64, kv_type="f32", n_threads=1) as d:
            d.decode(tokens, 0)
            assert d.kv_shift(2, 4, len(tokens))
            shifted = d.decode([7], len(keep))
        with CDecoder(f, cfg, 64, kv_type="f32", n_threads=1) as d:
            fresh = d.decode(keep + [7], 0)
    assert np.abs(shifted - fresh).max() < 1e-4, np.abs(shifted - fresh).max()


def test_a_yarn_cache_is_not_shifted(tmp_path):
    """YaRN scales the keys' magnitude with their angles, so a second rotation would scale them
    twice: the decoder refuses the shift and the caller decodes the moved tokens again."""
    path = write_arch_model(tmp_path / "yarn.gguf", "qwen2_yarn", seed=4, n_layer=1)
    with open_gguf(path) as f:
        with CDecoder(f, config_from_gguf(f), 64, kv_type="f32", n_threads=1) as d:
            d.decode(list(range(3, 23)), 0)
            assert not d.kv_shift(2, 4, 20)
