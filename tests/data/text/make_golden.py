"""Writes the golden token files in tests/data/text/ with llama.cpp as the oracle.

Run with a Python that has llama-cpp-python, gguf and numpy installed (not needed by the suite):
    /path/to/llvenv/bin/python tests/data/text/make_golden.py
For each vocabulary (SmolLM2-135M-Instruct and the synthetic SentencePiece models written by
tests/synth.py) and each string of corpus.json plus seeded random strings, it records the ids
of llama.cpp's tokenizer (with and without special-token parsing), the detokenized bytes, the
end-of-generation ids, and a digest of every token's piece.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

import llama_cpp  # noqa: E402

from tests.models import require_smollm2  # noqa: E402
from tests.synth import smollm2_vocab, write_tiny_bpe_model, write_tiny_model, write_tiny_spm_model  # noqa: E402

# Synthetic SentencePiece variants: name -> keyword arguments of write_tiny_spm_model.
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


# Pre-tokenizer names checked with SmolLM2's byte-level vocabulary under each name.
BPE_PRES = [
    "default",
    "gpt-2",
    "llama3",
    "llama-bpe",
    "qwen2",
    "qwen35",
    "deepseek-llm",
    "deepseek-coder",
    "deepseek-v3",
    "starcoder",
    "smollm",
    "falcon",
    "bloom",
    "gpt-4o",
    "tekken",
    "chameleon",
    "seed-coder",
    "superbpe",
    "minicpm5",
    "bailingmoe",
    "viking",
    "command-r",
    "dbrx",
    "stablelm2",
    "olmo",
    "mpt",
]


def random_strings(seed: int = 1234, n: int = 150) -> list[str]:
    """Seeded strings drawn from pools of awkward characters."""
    rng = random.Random(seed)
    pools = [
        " \t\n\r",
        "abcXYZ",
        "0123456789",
        "'\"`.,;:!?-_()[]{}<>/\\|@#$%^&*+=~",
        "éèêëàâäôöûüçñßøåæœ",
        "\u0301\u0308\u0327\u200d\u200c\ufe0f",
        "日本語中文한국어ひらがなカタカナ",
        "😀🦙👍🏽🇯🇵❤✅🎉",
        "مرحبا שלום",
        "\u00a0\u3000\u2009\u2028\x00\x1b\x7f\ufeff",
        "١٢٣۴۵६७೧",
    ]
    words = ["<|im_end|>", "<|im_start|>", "<s>", "</s>", "<|tool|>", "'s", "'ll", " the", "\n\n", "    "]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.15:
                parts.append(rng.choice(words))
            else:
                pool = rng.choice(pools)
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 6))))
        out.append("".join(parts))
    return out


class Oracle:
    def __init__(self, path: Path):
        self.llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm._model.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        raw = text.encode("utf-8")
        cap = len(raw) + 16
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self.vocab, raw, len(raw), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(self.vocab, raw, len(raw), buf, cap, add_special, parse_special)
        return list(buf[:n])

    def detokenize(self, ids: list[int], special: bool) -> bytes:
        arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        cap = 64 + 64 * len(ids)
        out = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(self.vocab, arr, len(ids), out, cap, False, special)
        assert n >= 0
        return out.raw[:n]

    def piece(self, token: int, special: bool) -> bytes:
        out = ctypes.create_string_buffer(512)
        n = llama_cpp.llama_token_to_piece(self.vocab, token, out, 512, 0, special)
        assert n >= 0
        return out.raw[:n]

    def pieces_digest(self, special: bool) -> str:
        h = hashlib.sha256()
        for t in range(self.n_vocab):
            p = self.piece(t, special)
            h.update(len(p).to_bytes(4, "little") + p)
        return h.hexdigest()

    def eog_ids(self) -> list[int]:
        return [t for t in range(self.n_vocab) if llama_cpp.llama_vocab_is_eog(self.vocab, t)]

    def ids(self) -> dict:
        v = self.vocab

        def opt(x: int) -> int | None:
            return None if x < 0 else x

        return {
            "bos": opt(llama_cpp.llama_vocab_bos(v)),
            "eos": opt(llama_cpp.llama_vocab_eos(v)),
            "eot": opt(llama_cpp.llama_vocab_eot(v)),
        }


def golden_for(oracle: Oracle, strings: dict[str, list[str]], model: str) -> dict:
    cases = []
    for category, texts in strings.items():
        for text in texts:
            ids = oracle.tokenize(text, True, False)
            cases.append(
                {
                    "category": category,
                    "text": text,
                    "ids": ids,
                    "ids_special": oracle.tokenize(text, False, True),
                    "decoded_hex": oracle.detokenize(ids, False).hex(),
                }
            )
    return {
        "model": model,
        "oracle": f"llama-cpp-python {llama_cpp.__version__}",
        "n_vocab": oracle.n_vocab,
        "special_ids": oracle.ids(),
        "eog_ids": oracle.eog_ids(),
        "pieces_sha256": oracle.pieces_digest(False),
        "pieces_special_sha256": oracle.pieces_digest(True),
        "cases": cases,
    }


def main() -> None:
    corpus = json.loads((HERE / "corpus.json").read_text())
    strings = dict(corpus, random=random_strings())
    n = sum(len(v) for v in strings.values())
    g = golden_for(Oracle(require_smollm2()), strings, "SmolLM2-135M-Instruct.Q4_1.gguf")
    (HERE / "golden_smollm2.json").write_text(json.dumps(g, ensure_ascii=True, indent=0) + "\n")
    print(f"golden_smollm2.json: {n} strings")
    with tempfile.TemporaryDirectory() as tmp:
        for name, kwargs in SPM_VARIANTS.items():
            path = write_tiny_spm_model(Path(tmp) / f"{name}.gguf", **kwargs)
            g = golden_for(Oracle(path), strings, f"tests.synth.write_tiny_spm_model(**{kwargs!r})")
            g["variant"] = kwargs
            (HERE / f"golden_{name}.json").write_text(json.dumps(g, ensure_ascii=True, indent=0) + "\n")
            print(f"golden_{name}.json: {n} strings")
        path = write_tiny_model(Path(tmp) / "tiny.gguf")
        g = golden_for(Oracle(path), strings, "tests.synth.write_tiny_model()")
        (HERE / "golden_tiny_bpe.json").write_text(json.dumps(g, ensure_ascii=True, indent=0) + "\n")
        print(f"golden_tiny_bpe.json: {n} strings")
        tokens, types, merges = smollm2_vocab(require_smollm2())
        texts = [t for v in corpus.values() for t in v]
        by_pre = {}
        for pre in BPE_PRES:
            path = write_tiny_bpe_model(
                Path(tmp) / f"bpe_{pre}.gguf", tokens, types, merges, pre=pre, bos_id=1, eos_id=2
            )
            o = Oracle(path)
            by_pre[pre] = [o.tokenize(t, False, False) for t in texts]
        g = {
            "vocab": "SmolLM2-135M-Instruct.Q4_1.gguf tokens, types and merges",
            "oracle": f"llama-cpp-python {llama_cpp.__version__}",
            "texts": texts,
            "ids": by_pre,
        }
        (HERE / "golden_bpe_pre.json").write_text(json.dumps(g, ensure_ascii=True, separators=(",", ":")) + "\n")
        print(f"golden_bpe_pre.json: {len(texts)} strings x {len(BPE_PRES)} pre-tokenizers")


if __name__ == "__main__":
    main()
