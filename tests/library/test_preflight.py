"""Pre-flight: memory needed against memory available, support verdict, chat-template status."""

from __future__ import annotations

import types

import pytest

import app.model
from app.errors import ModelFormatError
from app.library import preflight as pf
from app.model import estimate_memory
from app.gguf import open_gguf
from tests.synth import write_tiny_model

GB = 1 << 30


@pytest.mark.parametrize(
    "needed, available, total, verdict",
    [
        (1 * GB, 8 * GB, 16 * GB, "ok"),
        (int(6.4 * GB), 8 * GB, 16 * GB, "ok"),  # exactly 80% of available
        (7 * GB, 8 * GB, 16 * GB, "warn"),  # fits, little room left
        (12 * GB, 8 * GB, 16 * GB, "warn"),  # only by pushing others to swap
        (15 * GB, 8 * GB, 16 * GB, "refuse"),  # more than 90% of physical memory
        (100 * GB, 8 * GB, 16 * GB, "refuse"),
    ],
)
def test_memory_verdict_thresholds(needed, available, total, verdict):
    v, msg = pf.memory_verdict(needed, available, total)
    assert v == verdict
    assert "available" in msg and "GB" in msg and "\n" not in msg


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_model(tmp_path / "t.gguf", seed=5)


@pytest.fixture
def supported(monkeypatch):
    monkeypatch.setattr(pf, "support_verdict", lambda f: types.SimpleNamespace(supported=True, reasons=[]))


def test_report_numbers_are_the_model_estimate(tiny, supported):
    with open_gguf(tiny) as f:
        est = estimate_memory(f, 128)
    r = pf.preflight(tiny, 128, available_bytes=8 * GB, total_bytes=16 * GB)
    assert (r.weights_bytes, r.kv_cache_bytes, r.scratch_bytes) == (
        est.weights_bytes,
        est.kv_cache_bytes,
        est.scratch_bytes,
    )
    assert r.needed_bytes == est.total_bytes
    assert (r.verdict, r.memory_verdict, r.template_status, r.n_ctx) == ("ok", "ok", "ok", 128)
    assert r.to_json()["verdict"] == "ok"
    assert r.summary().startswith("ok: supported; memory: needs")


def test_too_little_memory_refuses_with_numbers(tiny, supported):
    r = pf.preflight(tiny, 256, available_bytes=100_000, total_bytes=200_000)
    assert r.verdict == r.memory_verdict == "refuse"
    assert "does not have enough memory" in r.summary()


def test_unsupported_model_is_refused_with_reasons(tiny, monkeypatch):
    monkeypatch.setattr(
        pf,
        "support_verdict",
        lambda f: types.SimpleNamespace(supported=False, reasons=["tensor type Q9_9 is not supported"]),
    )
    r = pf.preflight(tiny, 64, available_bytes=8 * GB, total_bytes=16 * GB)
    assert r.verdict == "refuse" and r.memory_verdict == "ok"
    assert r.support_reasons == ("tensor type Q9_9 is not supported",)


def test_real_support_verdict_is_used(tiny):
    r = pf.preflight(tiny, 64, available_bytes=8 * GB, total_bytes=16 * GB)
    with open_gguf(tiny) as f:
        v = app.model.support_verdict(f)
    assert r.supported == v.supported and list(r.support_reasons) == list(v.reasons)


def test_broken_template_warns(tmp_path, supported):
    p = write_tiny_model(tmp_path / "b.gguf", extra_metadata={"tokenizer.chat_template": "{% for m in %}"})
    r = pf.preflight(p, 64, available_bytes=8 * GB, total_bytes=16 * GB)
    assert (r.verdict, r.template_status) == ("warn", "invalid")
    assert "fallback" in r.summary()


def test_missing_template_is_reported():
    f = types.SimpleNamespace(metadata={})
    assert pf.chat_template_status(f)[0] == "missing"


def test_bad_file_raises_format_error(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"GGUF\3\0\0\0")
    with pytest.raises(ModelFormatError):
        pf.preflight(p)


def test_real_model(smollm2_path, supported):
    r = pf.preflight(smollm2_path, 2048)
    assert r.available_bytes > 0 and r.total_bytes >= r.available_bytes
    assert r.weights_bytes > 80e6 and r.template_status == "ok"
