"""`llambda inspect` end to end, in a subprocess as a user would run it."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import gguf
import pytest

from tests.gguf.craft import build, kv_str, kv_u32, small_valid
from tests.synth import TinySpec, write_tiny_model


def llambda(*args: str, timeout: float = 60) -> tuple[int, str, str, float]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr, time.perf_counter() - t


def test_inspect_smollm2(smollm2_path):
    rc, out, err, _ = llambda("inspect", str(smollm2_path))
    assert rc == 0, err
    assert "architecture      llama" in out
    assert "layers            30" in out
    assert "Q4_1      210 tensors" in out
    assert "chat template     present" in out
    assert "gpt2 (smollm), 49152 tokens" in out
    assert "verdict           supported" in out


def test_inspect_smollm2_json(smollm2_path):
    rc, out, err, _ = llambda("inspect", "--json", str(smollm2_path))
    assert rc == 0, err
    info = json.loads(out)
    assert info["block_count"] == 30
    assert info["tensor_types"]["Q4_1"]["count"] == 210
    assert info["tokenizer_model"] == "gpt2" and info["chat_template"] is True
    assert info["parameters"] == 134_515_008
    assert info["file_type"] == "Q4_1"
    assert info["verdict"] == {"supported": True, "reasons": []}
    assert info["memory"]["kv_cache"] == 2 * 30 * 8192 * 3 * 64 * 2


HOSTILE = {
    "magic": b"GGML" + small_valid()[4:],
    "version1": build([kv_str("general.architecture", "llama")], version=1),
    "bigendian": build([kv_str("general.architecture", "llama")], version=0x03000000),
    "huge_kv_count": build([], n_kv=2**64 - 1),
    "truncated": small_valid()[:100],
    "bad_alignment": build([kv_u32("general.alignment", 3)]),
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_inspect_refuses_hostile_file(tmp_path, name):
    p = tmp_path / f"{name}.gguf"
    p.write_bytes(HOSTILE[name])
    rc, out, err, seconds = llambda("inspect", str(p))
    assert rc == 3
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("llambda: error: ")
    assert "Traceback" not in err
    assert seconds < 5  # interpreter start included; the parse itself is milliseconds


def test_inspect_absurd_context_is_refused(tmp_path):
    p = write_tiny_model(
        tmp_path / "m.gguf",
        TinySpec(n_layer=1, n_embd=32, n_ff=64),
        extra_metadata={"llama.context_length": (10**12, gguf.GGUFValueType.UINT64)},
    )
    rc, _, err, _ = llambda("inspect", str(p))
    assert rc == 3 and "KV cache alone would need" in err


def test_inspect_unsupported_architecture(tmp_path):
    p = write_tiny_model(tmp_path / "m.gguf", TinySpec(arch="gptneox", n_layer=1, n_embd=32, n_ff=64))
    rc, out, err, _ = llambda("inspect", "--json", str(p))
    assert rc == 4
    info = json.loads(out)
    assert info["verdict"]["supported"] is False
    assert "architecture 'gptneox' is not supported" in info["verdict"]["reasons"]


def test_usage_errors_exit_2():
    rc, _, err, _ = llambda("inspect")
    assert rc == 2 and "usage" in err
    rc, _, err, _ = llambda("inspect", "--bogus", "x")
    assert rc == 2


def test_missing_file_exit_3(tmp_path):
    rc, _, err, _ = llambda("inspect", str(tmp_path / "nope.gguf"))
    assert rc == 3 and "no such file" in err


def test_version_names_isa():
    rc, out, _, _ = llambda("--version")
    assert rc == 0 and out.startswith("llambda 0.1.0 (kernels: ")
