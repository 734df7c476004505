"""The text half of `llambda tokenize`: one load, ids per text or per JSON line."""

from __future__ import annotations

import io
import json

import pytest

from app.text.cli import cli_tokenize
from tests.text.conftest import golden


def test_text_argument(smollm2_path):
    out = io.StringIO()
    assert cli_tokenize(str(smollm2_path), "Hello world", stdout=out) == 0
    assert out.getvalue() == "19556 905\n"
    out = io.StringIO()
    cli_tokenize(str(smollm2_path), "<|im_end|>", as_json=True, special=True, stdout=out)
    assert json.loads(out.getvalue()) == [2]


def test_json_lines_on_stdin_match_the_golden_ids(smollm2_path):
    cases = golden("smollm2")["cases"][:300]
    stdin = io.StringIO("".join(json.dumps(c["text"]) + "\n" for c in cases))
    out = io.StringIO()
    cli_tokenize(str(smollm2_path), stdin=stdin, stdout=out)
    got = [json.loads(line) for line in out.getvalue().splitlines()]
    assert got == [c["ids"] for c in cases]


def test_bad_stdin_line_is_one_clear_error(smollm2_path):
    with pytest.raises(ValueError, match="stdin line 2: expected a JSON string"):
        cli_tokenize(str(smollm2_path), stdin=io.StringIO('"ok"\n[1]\n'), stdout=io.StringIO())
