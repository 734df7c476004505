"""Writes tests/data/text/spm_vocab.json: a small SentencePiece BPE vocabulary for synthetic models.

Trained once with the `sentencepiece` trainer on Python docstrings and the test corpus (so
the committed vocabulary, not the trainer's version, defines the golden ids), then given the
extra tokens real GGUF vocabularies carry: control tokens of chat templates and user-defined
tokens, some written with real whitespace. Layout like Llama's: <unk>, <s>, </s>, 256 byte
tokens, learned pieces, added tokens.
"""

from __future__ import annotations

import inspect
import io
import json
import pydoc
from pathlib import Path

HERE = Path(__file__).resolve().parent

CONTROL = [
    "<|im_start|>",
    "<|im_end|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<|eot_id|>",
    "<|user|>",
    "<|assistant|>",
    "<|system|>",
    "<|end|>",
]
USER_DEFINED = ["<|tool|>", "<think>", "</think>", "\n\n", "    ", "\t\t", "<0x41>x"]


def training_text() -> list[str]:
    lines = []
    for name in (
        "builtins",
        "os",
        "re",
        "json",
        "collections",
        "itertools",
        "functools",
        "pathlib",
        "argparse",
        "string",
        "textwrap",
        "typing",
        "dataclasses",
        "logging",
        "subprocess",
    ):
        mod = pydoc.locate(name)
        for _, obj in inspect.getmembers(mod):
            doc = inspect.getdoc(obj) or ""
            lines.extend(doc.splitlines())
        try:
            lines.extend(inspect.getsource(mod).splitlines())
        except (TypeError, OSError):
            pass
    corpus = json.loads((HERE / "corpus.json").read_text())
    for strings in corpus.values():
        lines.extend(s for s in strings if s.strip())
    return [ln for ln in lines if ln.strip()]


def main() -> None:
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(training_text()),
        model_writer=buf,
        model_type="bpe",
        vocab_size=1500,
        byte_fallback=True,
        character_coverage=0.9995,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        max_sentence_length=100000,
        num_threads=1,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(round(float(sp.get_score(i)), 4))
        types.append(
            2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 5 if sp.is_unused(i) else 1
        )
    for t in CONTROL:
        tokens.append(t), scores.append(0.0), types.append(3)
    for t in USER_DEFINED:
        tokens.append(t), scores.append(0.0), types.append(4)
    out = {"tokens": tokens, "scores": scores, "types": types}
    (HERE / "spm_vocab.json").write_text(json.dumps(out, ensure_ascii=True) + "\n")
    print(f"{len(tokens)} tokens")


if __name__ == "__main__":
    main()
