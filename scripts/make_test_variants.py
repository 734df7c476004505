#!/usr/bin/env python3
"""Make the SmolLM2 variant files the engine tests need (tests/data/engine/smollm2_variants.json).

Each variant is SmolLM2-135M-Instruct Q4_1 requantized by llama.cpp's own quantizer into another
tensor type. Run with a Python that has llama-cpp-python (the version the goldens were made with):

    python scripts/make_test_variants.py [--check]

Files go to $LLAMBDA_TEST_CACHE/variants (default ~/.cache/llambda-test/variants); each is
checked against the size and SHA-256 recorded in the golden file. `--check` only reports what
is missing (exit 1 if anything is), without needing llama.cpp.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "engine" / "smollm2_variants.json"
CACHE = Path(os.environ.get("LLAMBDA_TEST_CACHE") or Path.home() / ".cache" / "llambda-test")
SOURCE = CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def missing(variants: list[dict]) -> list[dict]:
    out = []
    for v in variants:
        p = CACHE / "variants" / v["file"]
        if not p.exists() or p.stat().st_size != v["size"]:
            out.append(v)
    return out


def make(v: dict) -> None:
    import llama_cpp

    out = CACHE / "variants" / v["file"]
    out.parent.mkdir(parents=True, exist_ok=True)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{v['type']}")
    params.allow_requantize = True
    params.nthread = 2
    tmp = out.with_suffix(".part")
    if llama_cpp.llama_model_quantize(str(SOURCE).encode(), str(tmp).encode(), params) != 0:
        raise SystemExit(f"quantizing to {v['type']} failed")
    if sha256(tmp) != v["sha256"]:
        tmp.unlink()
        raise SystemExit(
            f"{v['file']}: SHA-256 differs from the golden file's; "
            "use the llama-cpp-python version the goldens were made with"
        )
    tmp.replace(out)
    print(f"made {out}", file=sys.stderr)


def main() -> int:
    variants = json.loads(GOLDEN.read_text())["variants"]
    todo = missing(variants)
    if "--check" in sys.argv:
        for v in todo:
            print(f"missing: {v['file']}")
        return 1 if todo else 0
    if todo and not SOURCE.exists():
        raise SystemExit(f"{SOURCE} is missing: run the test suite once, or tests/models.py, first")
    for v in todo:
        make(v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
