"""Checks our tokenizers against llama.cpp on any GGUF files (for example llama.cpp's own
models/ggml-vocab-*.gguf), outside the test suite. Two steps, two Pythons:

    LLVENV/bin/python tests/data/text/check_vocabs.py oracle OUT.json FILE.gguf...   # llama-cpp-python
    .venv/bin/python  tests/data/text/check_vocabs.py check  OUT.json                 # this project

The oracle step records, per file, llama.cpp's ids (plain and with special parsing), its
detokenized bytes, piece digests and end-of-generation ids for the corpus plus random strings;
the check step compares ours with all of it, and the streamed text with the whole decode.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))
sys.path.insert(0, str(HERE))


def oracle(out: str, paths: list[str]) -> None:
    from make_golden import Oracle, golden_for, random_strings

    corpus = json.loads((HERE / "corpus.json").read_text())
    strings = dict(corpus, random=random_strings(77, 300))
    Path(out).write_text(json.dumps({p: golden_for(Oracle(Path(p)), strings, p) for p in paths}))


def check(out: str) -> int:
    from app.gguf import open_gguf
    from app.text import Detokenizer, load_tokenizer

    warnings.simplefilter("ignore")
    failures = 0
    for path, g in json.loads(Path(out).read_text()).items():
        t0 = time.perf_counter()
        with open_gguf(path) as f:
            tok = load_tokenizer(f)
        built = time.perf_counter() - t0
        bad = []
        for c in g["cases"]:
            if tok.encode(c["text"]) != c["ids"]:
                bad.append(("ids", c["text"]))
            if tok.encode(c["text"], add_special=False, parse_special=True) != c["ids_special"]:
                bad.append(("special", c["text"]))
            if tok.decode_bytes(c["ids"], clean_spaces=None) != bytes.fromhex(c["decoded_hex"]):
                bad.append(("decode", c["text"]))
            d = Detokenizer(tok)
            if "".join(d.feed(t) for t in c["ids"]) + d.flush() != tok.decode(c["ids"]):
                bad.append(("stream", c["text"]))
        for special, key in ((False, "pieces_sha256"), (True, "pieces_special_sha256")):
            h = hashlib.sha256()
            for t in range(tok.n_vocab):
                p = tok.token_to_piece(t, special=special)
                h.update(len(p).to_bytes(4, "little") + p)
            if h.hexdigest() != g[key]:
                bad.append(("pieces", special))
        if sorted(tok.eog_ids) != g["eog_ids"]:
            bad.append(("eog", sorted(tok.eog_ids), g["eog_ids"]))
        print(
            f"{Path(path).name}: {tok.n_vocab} tokens, built in {built:.2f} s, "
            f"{len(g['cases'])} strings, {len(bad)} differences {bad[:3]}"
        )
        failures += bool(bad)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "oracle":
        oracle(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    else:
        sys.exit(__doc__)
