"""Support verdicts name exactly what is missing, before anything loads: an unknown or not yet
runnable architecture, each absent tensor of the architecture's layout (biases of qwen2, QK-norms
of qwen3/gemma3, post-norms of gemma2/3, phi3's fused ffn_up), with the rest counted; and tensors
present that the engine would not apply.
"""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from app.gguf import open_gguf
from app.model.support import support_verdict
from tests.engine.synth_arch import write_arch_model


def _without(src, dst, drop: set[str], arch: str | None = None):
    """A copy of the GGUF at src without the tensors in drop (and another architecture name)."""
    r = gguf.GGUFReader(str(src))
    old = r.fields["general.architecture"].contents()
    new = arch or old
    w = gguf.GGUFWriter(str(dst), new)
    for field in r.fields.values():
        name = field.name
        if name.startswith("GGUF.") or name in ("general.architecture",):
            continue
        vtype = field.types[0]
        key = new + name[len(old) :] if name.startswith(old + ".") else name
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, field.contents(), vtype, field.types[-1])
        else:
            w.add_key_value(key, field.contents(), vtype)
    for t in r.tensors:
        if t.name not in drop:
            w.add_tensor(t.name, np.array(t.data).reshape(list(reversed(t.shape.tolist()))))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


@pytest.mark.parametrize("name", ["qwen2", "qwen3", "llama_variant", "gemma", "gemma2", "gemma3", "phi3"])
def test_synthetic_models_are_supported(name, tmp_path):
    with open_gguf(write_arch_model(tmp_path / "m.gguf", name)) as f:
        v = support_verdict(f)
    assert v.supported, v.reasons


@pytest.mark.parametrize(
    "name, drop",
    [
        ("qwen2", ["blk.1.attn_q.bias"]),
        ("qwen3", ["blk.0.attn_k_norm.weight"]),
        ("gemma2", ["blk.2.post_ffw_norm.weight"]),
        ("gemma3", ["blk.5.attn_q_norm.weight", "blk.6.post_attention_norm.weight"]),
        ("phi3", ["blk.1.ffn_up.weight"]),
    ],
)
def test_a_missing_tensor_is_named(name, drop, tmp_path):
    src = write_arch_model(tmp_path / "m.gguf", name)
    with open_gguf(_without(src, tmp_path / "bad.gguf", set(drop))) as f:
        v = support_verdict(f)
    assert not v.supported
    assert v.reasons == [f"{t} missing" for t in drop]


def test_many_missing_tensors_are_counted(tmp_path):
    src = write_arch_model(tmp_path / "m.gguf", "qwen2")
    drop = {f"blk.{i}.attn_{x}.bias" for i in range(3) for x in "qkv"}
    with open_gguf(_without(src, tmp_path / "bad.gguf", drop)) as f:
        v = support_verdict(f)
    assert v.reasons == [
        "blk.0.attn_q.bias missing",
        "blk.0.attn_k.bias missing",
        "blk.0.attn_v.bias missing",
        "6 more tensors missing",
    ]


@pytest.mark.parametrize(
    "arch, reason",
    [
        ("mamba", "architecture 'mamba' is not supported"),
        ("gptneox", "architecture 'gptneox' is not supported"),
    ],
)
def test_other_architectures_are_named(arch, reason, tmp_path):
    src = write_arch_model(tmp_path / "m.gguf", "qwen3")
    with open_gguf(_without(src, tmp_path / "other.gguf", set(), arch=arch)) as f:
        v = support_verdict(f)
    assert v.reasons == [reason]


def test_tensors_the_engine_would_not_apply_are_named(tmp_path):
    """A qwen3 file labelled llama: its QK-norm weights would be loaded and silently skipped,
    and the model would run wrong. The verdict names them instead."""
    src = write_arch_model(tmp_path / "m.gguf", "qwen3")
    with open_gguf(_without(src, tmp_path / "relabelled.gguf", set(), arch="llama")) as f:
        v = support_verdict(f)
    assert v.reasons == [
        "blk.0.attn_q_norm.weight is not used by this engine (and 2 more like it)",
        "blk.0.attn_k_norm.weight is not used by this engine (and 2 more like it)",
    ]


def test_a_recognised_architecture_not_yet_proven_says_what_it_lacks(tmp_path, monkeypatch):
    from app.model import config

    monkeypatch.setitem(config.ARCHITECTURES, "qwen3", config.ArchSpec(lacking="no kernel for X"))
    with open_gguf(write_arch_model(tmp_path / "m.gguf", "qwen3")) as f:
        assert support_verdict(f).reasons == ["architecture 'qwen3' is not supported yet (no kernel for X)"]
