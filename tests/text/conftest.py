"""Tokenizers shared by the text tests: SmolLM2 (real) and the synthetic SentencePiece variants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.gguf import open_gguf
from app.text import load_tokenizer
from tests.synth import write_tiny_model, write_tiny_spm_model

DATA = Path(__file__).resolve().parents[1] / "data" / "text"
SPM_VARIANTS = {
    "spm_prefix": {"add_space_prefix": True, "add_bos": True},
    "spm_noprefix": {"add_space_prefix": False, "add_bos": False},
    # learned pieces re-typed: "▁the" and "▁▁" unused, "ing" undefined, "▁a" user-defined, "er" control
    "spm_retyped": {
        "add_space_prefix": True,
        "add_bos": True,
        "type_overrides": {275: 5, 278: 0, 264: 4, 265: 3, 259: 5},
    },
}


def golden(name: str) -> dict:
    return json.loads((DATA / f"golden_{name}.json").read_text())


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_path):
    with open_gguf(smollm2_path) as f:
        return load_tokenizer(f)


@pytest.fixture(scope="session")
def spm_paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("spm")
    return {name: write_tiny_spm_model(d / f"{name}.gguf", **kw) for name, kw in SPM_VARIANTS.items()}


@pytest.fixture(scope="session")
def spm_tokenizers(spm_paths):
    out = {}
    for name, path in spm_paths.items():
        with open_gguf(path) as f:
            out[name] = load_tokenizer(f)
    return out


@pytest.fixture(scope="session")
def tiny_bpe_tokenizer(tmp_path_factory):
    """The byte-level vocabulary of tests.synth.write_tiny_model (256 bytes, a few merges)."""
    path = write_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf")
    with open_gguf(path) as f:
        return load_tokenizer(f)


@pytest.fixture(scope="session")
def tokenizers_by_name(smollm2_tokenizer, spm_tokenizers, tiny_bpe_tokenizer):
    return {"smollm2": smollm2_tokenizer, "tiny_bpe": tiny_bpe_tokenizer, **spm_tokenizers}
