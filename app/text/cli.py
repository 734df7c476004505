"""`llambda tokenize MODEL [TEXT] [--json] [--special]`: the text side of the command line.

`cli_tokenize` loads the tokenizer once and writes ids: for TEXT, one line (space-separated ids,
or a JSON array with `as_json`); without TEXT, one JSON string per input line in, one JSON array
of ids per line out. Errors are raised (one line each); the caller maps them to exit codes.
"""

from __future__ import annotations

import json
import sys
from typing import Iterable, Iterator, TextIO

from app.gguf import open_gguf
from app.text.tokenizer import Tokenizer, load_tokenizer


def tokenize_json_lines(
    tokenizer: Tokenizer, lines: Iterable[str], special: bool = False, add_special: bool = True
) -> Iterator[str]:
    """One JSON array of ids for each line holding a JSON string; blank lines are skipped."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            text = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"stdin line {n}: not JSON ({e.msg})") from None
        if not isinstance(text, str):
            raise ValueError(f"stdin line {n}: expected a JSON string, got {type(text).__name__}")
        yield json.dumps(tokenizer.encode(text, add_special=add_special, parse_special=special))


def cli_tokenize(
    model: str,
    text: str | None = None,
    as_json: bool = False,
    special: bool = False,
    add_special: bool = True,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    """Run `llambda tokenize`; returns 0. Raises ModelFormatError / TokenizerError / ValueError."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    with open_gguf(model) as f:
        tokenizer = load_tokenizer(f)
    if text is not None:
        ids = tokenizer.encode(text, add_special=add_special, parse_special=special)
        stdout.write((json.dumps(ids) if as_json else " ".join(map(str, ids))) + "\n")
        return 0
    for out in tokenize_json_lines(tokenizer, stdin, special=special, add_special=add_special):
        stdout.write(out + "\n")
    stdout.flush()
    return 0
