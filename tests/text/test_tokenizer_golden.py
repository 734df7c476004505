"""Token ids, pieces and end-of-generation ids against golden files made by llama.cpp.

The golden files (tests/data/text/golden_*.json) come from tests/data/text/make_golden.py;
each holds the corpus (corpus.json, 256 strings in 11 categories) plus 150 seeded random strings.
"""

from __future__ import annotations

import hashlib

import pytest

from tests.text.conftest import golden

NAMES = ["smollm2", "spm_prefix", "spm_noprefix", "spm_retyped", "tiny_bpe"]


def _mismatches(tok, cases, **kw):
    key = "ids_special" if kw.get("parse_special") else "ids"
    bad = []
    for c in cases:
        got = tok.encode(c["text"], **kw)
        if got != c[key]:
            bad.append(f"{c['category']}: {c['text']!r}: want {c[key]} got {got}")
    return bad


@pytest.mark.parametrize("name", NAMES)
def test_ids_match_llama_cpp(name, tokenizers_by_name):
    g = golden(name)
    bad = _mismatches(tokenizers_by_name[name], g["cases"])
    assert not bad, f"{len(bad)} of {len(g['cases'])} differ:\n" + "\n".join(bad[:10])


@pytest.mark.parametrize("name", NAMES)
def test_ids_with_special_parsing_match_llama_cpp(name, tokenizers_by_name):
    g = golden(name)
    bad = _mismatches(tokenizers_by_name[name], g["cases"], add_special=False, parse_special=True)
    assert not bad, f"{len(bad)} of {len(g['cases'])} differ:\n" + "\n".join(bad[:10])


@pytest.mark.parametrize("name", NAMES)
def test_decode_matches_llama_cpp(name, tokenizers_by_name):
    tok = tokenizers_by_name[name]
    bad = []
    for c in golden(name)["cases"]:
        want = bytes.fromhex(c["decoded_hex"])
        got = tok.decode_bytes(c["ids"], clean_spaces=None)
        if got != want:
            bad.append(f"{c['text']!r}: want {want!r} got {got!r}")
    assert not bad, "\n".join(bad[:10])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("special", [False, True])
def test_every_piece_matches_llama_cpp(name, special, tokenizers_by_name):
    tok = tokenizers_by_name[name]
    g = golden(name)
    assert tok.n_vocab == g["n_vocab"]
    h = hashlib.sha256()
    for t in range(tok.n_vocab):
        p = tok.token_to_piece(t, special=special)
        h.update(len(p).to_bytes(4, "little") + p)
    assert h.hexdigest() == g["pieces_special_sha256" if special else "pieces_sha256"]


@pytest.mark.parametrize("name", NAMES)
def test_special_and_eog_ids_match_llama_cpp(name, tokenizers_by_name):
    tok = tokenizers_by_name[name]
    g = golden(name)
    assert sorted(tok.eog_ids) == g["eog_ids"]
    assert tok.bos_id == g["special_ids"]["bos"]
    assert tok.eos_id == g["special_ids"]["eos"]
    # Which of several end-of-turn texts llama.cpp picks as "the" EOT follows its hash-map order;
    # only membership matters for stopping.
    assert (tok.eot_id is None) == (g["special_ids"]["eot"] is None)
    assert tok.eot_id is None or tok.eot_id in tok.eog_ids


def test_corpus_is_large_and_covers_every_category():
    cases = golden("smollm2")["cases"]
    corpus = [c for c in cases if c["category"] != "random"]
    assert len(corpus) >= 200
    assert {c["category"] for c in corpus} >= {
        "prose",
        "code",
        "whitespace",
        "cjk",
        "emoji",
        "accents",
        "rtl",
        "control",
        "digits",
        "special",
    }


def test_every_pre_tokenizer_matches_llama_cpp(smollm2_path, tmp_path):
    """SmolLM2's byte-level vocabulary under 26 `tokenizer.ggml.pre` names, corpus ids from llama.cpp."""
    from app.gguf import open_gguf
    from app.text import load_tokenizer
    from tests.synth import smollm2_vocab, write_tiny_bpe_model

    g = golden("bpe_pre")
    tokens, types, merges = smollm2_vocab(smollm2_path)
    bad = []
    for pre, want_all in g["ids"].items():
        path = write_tiny_bpe_model(tmp_path / f"{pre}.gguf", tokens, types, merges, pre=pre, bos_id=1, eos_id=2)
        with open_gguf(path) as f:
            tok = load_tokenizer(f)
        path.unlink()
        for text, want in zip(g["texts"], want_all):
            got = tok.encode(text, add_special=False)
            if got != want:
                bad.append(f"{pre}: {text!r}: want {want} got {got}")
    assert not bad, f"{len(bad)} differ:\n" + "\n".join(bad[:10])


def test_unknown_pre_tokenizer_falls_back_with_a_warning(smollm2_path, tmp_path):
    from app.gguf import open_gguf
    from app.text import load_tokenizer
    from tests.synth import smollm2_vocab, write_tiny_bpe_model

    tokens, types, merges = smollm2_vocab(smollm2_path)
    path = write_tiny_bpe_model(tmp_path / "odd.gguf", tokens, types, merges, pre="no-such-pre", bos_id=1, eos_id=2)
    with open_gguf(path) as f, pytest.warns(UserWarning, match="unknown pre-tokenizer 'no-such-pre'"):
        tok = load_tokenizer(f)
    assert tok.decode(tok.encode("Hello world", add_special=False)) == "Hello world"


def test_describe_is_plain_data(smollm2_tokenizer):
    import json

    d = smollm2_tokenizer.describe()
    assert json.loads(json.dumps(d)) == d
    assert d["model"] == "gpt2" and d["pre"] == "smollm" and d["n_vocab"] == 49152
    assert d["bos"] == {"id": 1, "text": "<|im_start|>"} and {"id": 2, "text": "<|im_end|>"} in d["eog"]
