"""Streaming detokenizer and stop conditions: streamed text equals the whole decode, byte for byte."""

from __future__ import annotations

import random

import pytest

from app.text.pretokenize import clean_up_spaces
from app.text.stream import Detokenizer, StopMatcher, TextStream
from tests.text.conftest import golden

NAMES = ["smollm2", "spm_prefix", "spm_noprefix", "spm_retyped", "tiny_bpe"]


def _stream(tok, ids, **kw):
    d = Detokenizer(tok, **kw)
    pieces = [d.feed(t) for t in ids]
    pieces.append(d.flush())
    return pieces


@pytest.mark.parametrize("name", NAMES)
def test_streamed_text_equals_whole_decode_on_the_corpus(name, tokenizers_by_name):
    tok = tokenizers_by_name[name]
    bad = []
    for c in golden(name)["cases"]:
        for ids in (c["ids"], c["ids_special"]):
            whole = tok.decode(ids)
            got = "".join(_stream(tok, ids))
            if got.encode("utf-8", "surrogatepass") != whole.encode("utf-8", "surrogatepass"):
                bad.append(f"{c['text']!r}: stream {got!r} whole {whole!r}")
    assert not bad, "\n".join(bad[:10])


@pytest.mark.parametrize("name", NAMES)
def test_streamed_text_equals_llama_cpp_detokenizer(name, tokenizers_by_name):
    tok = tokenizers_by_name[name]
    for c in golden(name)["cases"]:
        want = bytes.fromhex(c["decoded_hex"])
        got = "".join(_stream(tok, c["ids"])).encode("utf-8", "surrogatepass")
        if tok.clean_spaces:  # llama.cpp's whole-text detokenizer also tidies spaces; a stream cannot
            got = clean_up_spaces(got)
        assert got == want, c["text"]


def test_a_character_split_across_byte_tokens_is_never_shown_half(spm_tokenizers):
    tok = spm_tokenizers["spm_prefix"]
    ids = tok.encode("日本🦙", add_special=False)
    assert len(ids) > 3  # the synthetic vocabulary spells these with byte tokens
    pieces = _stream(tok, ids)
    assert "".join(pieces) == "日本🦙"
    assert all("\ufffd" not in p for p in pieces)
    assert [p for p in pieces if p] == ["日", "本", "🦙"]


def test_split_emoji_in_byte_level_bpe_is_assembled(smollm2_tokenizer):
    tok = smollm2_tokenizer
    text = "👨‍👩‍👧‍👦 and 🦙"
    ids = tok.encode(text)
    pieces = _stream(tok, ids)
    assert "".join(pieces) == text
    for p in pieces:
        p.encode("utf-8")  # every piece is whole characters


@pytest.mark.parametrize("seed", range(5))
def test_invalid_bytes_become_replacement_characters_and_the_turn_goes_on(spm_tokenizers, seed):
    tok = spm_tokenizers["spm_prefix"]
    byte_ids = [i for i in range(tok.n_vocab) if tok.token_text(i).startswith("<0x") and len(tok.token_text(i)) == 6]
    assert len(byte_ids) == 256
    rng = random.Random(seed)
    word = tok.encode("hello", add_special=False)
    ids = []
    for _ in range(60):
        ids += rng.sample(byte_ids, rng.randint(1, 4)) if rng.random() < 0.7 else word
    pieces = _stream(tok, ids)
    assert "".join(pieces) == tok.decode(ids)
    assert "\ufffd" in "".join(pieces)
    assert "hello" in "".join(pieces)


def test_truncated_character_at_the_end_flushes_as_replacement(spm_tokenizers):
    tok = spm_tokenizers["spm_noprefix"]
    ids = tok.encode("日", add_special=False)[:-1]
    d = Detokenizer(tok)
    assert "".join(d.feed(t) for t in ids) == ""
    assert d.flush() == "\ufffd"


def test_space_prefix_is_stripped_from_the_first_token_only(spm_tokenizers):
    tok = spm_tokenizers["spm_prefix"]
    ids = tok.encode("Hi there", add_special=False)
    assert tok.token_to_piece(ids[0]).startswith(b" ")
    assert "".join(_stream(tok, ids)) == "Hi there"
    assert "".join(_stream(tok, ids, strip_leading_space=False)) == " Hi there"


# ---- stop strings ---------------------------------------------------------------------------


def test_stop_string_across_pieces_is_never_emitted():
    m = StopMatcher(["</answer>"])
    shown = [m.push(p) for p in ["The", " answer is 4", "</", "ans", "wer>", " ignored"]]
    assert shown == ["The", " answer is 4", "", "", "", ""]
    assert m.matched == "</answer>"
    assert m.flush() == ""


def test_held_prefix_is_released_when_it_is_not_a_stop_string():
    m = StopMatcher(["STOP"])
    assert m.push("go ST") == "go "
    assert m.push("OP") == ""
    m = StopMatcher(["STOP"])
    assert m.push("go ST") == "go "
    assert m.push("ART") == "START"
    assert m.push("S") == ""
    assert m.flush() == "S"


def test_earliest_stop_string_wins_and_text_after_it_is_dropped():
    m = StopMatcher(["bb", "a"])
    assert m.push("xxbbya") == "xx"
    assert m.matched == "bb"


def test_text_stream_stops_at_end_of_generation_token(smollm2_tokenizer):
    tok = smollm2_tokenizer
    ids = tok.encode("Hello world<|im_end|>more", parse_special=True)
    s = TextStream(tok)
    steps = [s.push(t) for t in ids]
    assert s.stopped == "eog"
    assert s.text == "Hello world"
    assert steps[-1].stop == "eog"
    stops = [st.stop for st in steps]
    assert stops.index("eog") == ids.index(tok.token_id("<|im_end|>"))


def test_text_stream_stop_string_across_tokens(smollm2_tokenizer):
    tok = smollm2_tokenizer
    ids = tok.encode("User: hi\nAssistant: hello\nUser: more", add_special=False)
    s = TextStream(tok, stop_strings=["\nUser:"])
    shown = ""
    for t in ids:
        step = s.push(t)
        shown += step.text
        assert "\nUser" not in shown
        if step.stop:
            break
    assert s.stopped == "stop_string"
    assert shown == s.text == "User: hi\nAssistant: hello"


def test_text_stream_finish_releases_held_text_and_incomplete_bytes(spm_tokenizers):
    tok = spm_tokenizers["spm_noprefix"]
    s = TextStream(tok, stop_strings=["xyz"])
    for t in tok.encode("abc x", add_special=False) + tok.encode("日", add_special=False)[:1]:
        s.push(t)
    assert s.text == "abc "
    assert s.finish() == "x\ufffd"
    assert s.text == "abc x\ufffd"


@pytest.mark.parametrize("seed", range(20))
def test_stop_matcher_equals_cutting_the_whole_text(seed):
    """Random texts, stop strings and piece boundaries: generation stops at the first piece after
    which the text so far holds a stop string, cut at its earliest one; nothing shown is taken back."""
    rng = random.Random(seed)
    for _ in range(200):
        text = "".join(rng.choice("abc\n") for _ in range(rng.randint(0, 40)))
        stops = ["".join(rng.choice("abc\n") for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 10))))
        pieces = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
        m = StopMatcher(stops)
        shown = ""
        for p in pieces:
            shown += m.push(p)
            if m.matched:
                break
        shown += m.flush()
        so_far, want, hit = "", text, False
        for p in pieces:
            so_far += p
            hits = [so_far.find(s) for s in stops if s in so_far]
            if hits:
                want, hit = so_far[: min(hits)], True
                break
        assert shown == want, (text, stops, pieces)
        assert (m.matched is not None) == hit
