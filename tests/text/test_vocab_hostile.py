"""Vocabulary metadata of the wrong shape or type: one clear TokenizerError, never a crash."""

from __future__ import annotations

import time

import gguf
import numpy as np
import pytest

from app.errors import LlambdaError, TokenizerError
from app.gguf import open_gguf
from app.text import load_tokenizer
from tests.synth import spm_vocab


def _write(path, model="llama", tokens=None, scores=None, types=None, merges=None, **ids):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    if tokens is not None:
        w.add_token_list(tokens)
    if scores is not None:
        w.add_array("tokenizer.ggml.scores", scores) if not isinstance(scores, np.ndarray) else w.add_key_value(
            "tokenizer.ggml.scores",
            [int(x) for x in scores],
            gguf.GGUFValueType.ARRAY,
            sub_type=gguf.GGUFValueType.INT8,
        )
    if types is not None:
        w.add_token_types(types)
    if merges is not None:
        w.add_token_merges(merges)
    for k, v in ids.items():
        w.add_uint32(f"tokenizer.ggml.{k}", v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _load(path):
    with open_gguf(path) as f:
        return load_tokenizer(f)


def test_unsupported_tokenizer_model(tmp_path):
    with pytest.raises(TokenizerError, match="'bert' is not supported"):
        _load(_write(tmp_path / "a.gguf", model="bert", tokens=["a"]))


def test_missing_token_list(tmp_path):
    with pytest.raises(TokenizerError, match="no tokenizer.ggml.tokens"):
        _load(_write(tmp_path / "a.gguf"))


def test_short_types_and_scores(tmp_path):
    tokens, scores, types = spm_vocab()
    with pytest.raises(TokenizerError, match="token types for"):
        _load(_write(tmp_path / "a.gguf", tokens=tokens, scores=scores, types=types[:10]))
    with pytest.raises(TokenizerError, match="token scores for"):
        _load(_write(tmp_path / "b.gguf", tokens=tokens, scores=scores[:10], types=types))


def test_scores_of_the_wrong_type(tmp_path):
    tokens, scores, types = spm_vocab()
    path = _write(tmp_path / "a.gguf", tokens=tokens, scores=np.zeros(len(tokens), np.int8), types=types)
    with pytest.raises(LlambdaError) as e:
        _load(path)
    assert "scores" in str(e.value) and "\n" not in str(e.value)


def test_special_ids_outside_the_vocabulary_are_ignored(tmp_path, caplog):
    tokens, scores, types = spm_vocab()
    tok = _load(
        _write(
            tmp_path / "a.gguf", tokens=tokens, scores=scores, types=types, bos_token_id=10**6, eos_token_id=len(tokens)
        )
    )
    assert tok.bos_id == 1 and tok.eos_id == 2  # the family defaults
    assert "outside the vocabulary" in caplog.text


def test_duplicate_tokens_are_refused(tmp_path):
    tokens, scores, types = spm_vocab()
    tokens = list(tokens)
    tokens[500] = tokens[501]
    with pytest.raises(TokenizerError, match="duplicate"):
        _load(_write(tmp_path / "a.gguf", tokens=tokens, scores=scores, types=types))


def test_bpe_without_merges(tmp_path):
    with pytest.raises(TokenizerError, match="without tokenizer.ggml.merges"):
        _load(_write(tmp_path / "a.gguf", model="gpt2", tokens=["a", "b"], types=[1, 1]))


def test_token_ids_outside_the_vocabulary_do_not_decode(spm_tokenizers):
    tok = spm_tokenizers["spm_prefix"]
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.decode([tok.n_vocab])
    with pytest.raises(TokenizerError):
        tok.token_to_piece(-1)


def test_a_large_vocabulary_builds_quickly(tmp_path):
    """A 150k-token SentencePiece vocabulary: built in well under a few seconds (generous bound)."""
    tokens, scores, types = spm_vocab()
    extra = [f"▁w{i:06d}" for i in range(150_000 - len(tokens))]
    path = _write(
        tmp_path / "big.gguf",
        tokens=tokens + extra,
        scores=list(scores) + [-1000.0 - i for i in range(len(extra))],
        types=types + [1] * len(extra),
    )
    t0 = time.perf_counter()
    tok = _load(path)
    elapsed = time.perf_counter() - t0
    assert tok.n_vocab == 150_000
    assert tok.decode(tok.encode("hello w000123", add_special=False)) == "hello w000123"
    assert elapsed < 10, elapsed
