"""llk's dot kernels against ggml's own (llama.cpp's CPU backend) on the same bytes: the value of
each product (an independent check of the format's semantics) and the in-cache speed ratio.

    python kernels/bench_vs_ggml.py [--ggml-lib DIR] [--types iq2_xxs,iq3_s,...] [--n 1048576]

ggml is loaded with ctypes from a llama-cpp-python install (DIR holds libggml-base.so and
libggml-cpu.so; default: /work/llvenv's). For each type: one row of n random blocks with sane
scales (app.kernels.random_weights) and q8 activations made by llk; the weight types whose ggml
dot consumes Q8_K read our q8_256 blocks cut to Q8_K's 292-byte layout (ours carries 16 bytes of
sums per 32 more at the end), so both libraries multiply the very same integers. Speed: weight GB/s of one thread, the row in L2, best of
`--reps` rounds of 200 calls, ours and ggml's alternating; ggml's calls go through ctypes (~1 us
each, <10% of a call at the default n for the grid types). Types whose ggml dot wants another
activation format (legacy 32-blocks, MXFP4) print ours only.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import app.kernels as K

DEFAULT_LIB = "/work/llvenv/lib/python3.11/site-packages/llama_cpp/lib"
GGML_TYPE_Q8_K = 15
VEC_DOT = ctypes.CFUNCTYPE(
    None,
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_float),
    ctypes.c_size_t,
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
)


class _TraitsCPU(ctypes.Structure):  # struct ggml_type_traits_cpu (ggml-cpu.h)
    _fields_ = [
        ("from_float", ctypes.c_void_p),
        ("vec_dot", VEC_DOT),
        ("vec_dot_type", ctypes.c_int),
        ("nrows", ctypes.c_int64),
    ]


def load_ggml(lib_dir: str):
    ctypes.CDLL(os.path.join(lib_dir, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(os.path.join(lib_dir, "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
    cpu.ggml_get_type_traits_cpu.restype = ctypes.POINTER(_TraitsCPU)
    cpu.ggml_cpu_init()
    return cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ggml-lib", default=DEFAULT_LIB)
    ap.add_argument("--types", default="iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s,iq1_s,iq1_m,tq1_0,tq2_0,mxfp4")
    ap.add_argument("--n", type=int, default=1 << 20, help="elements of the row (a multiple of 256)")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    cpu = load_ggml(args.ggml_lib)
    by_name = {v: k for k, v in K.TYPE_NAMES.items()}
    n = args.n
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    level = K.best_isa_level()
    print(f"n = {n}, llk level {K.isa_name(level)}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'type':<8} {'llk dot':>14} {'ggml dot':>14} {'rel diff':>9} {'llk GB/s':>9} {'ggml GB/s':>9} {'ratio':>6}")
    for tname in args.types.split(","):
        t = by_name[tname.strip().upper()]
        w = K.random_weights(t, 1, n, seed=t)[0]
        a = K.quantize_activations(t, x, isa="ref")
        ours = K.vec_dot(t, w, a, n, isa=level)
        tr = cpu.ggml_get_type_traits_cpu(t).contents
        out = ctypes.c_float()
        best_ours = best_ggml = float("inf")
        comparable = tr.vec_dot_type == GGML_TYPE_Q8_K and K.block_size(t) == 256
        if comparable:  # Q8_K: d, qs, bsums (our block's first 292 bytes of 308)
            a_q8k = np.ascontiguousarray(a.view(np.uint8).reshape(-1, 308)[:, :292])
        for _ in range(args.reps):
            r = K.bench_in_cache([t], [level], n_rows=1, n_cols=n, inner=200, reps=1)[0]
            best_ours = min(best_ours, w.nbytes / r["bytes_per_s"])
            if comparable:
                t0 = time.perf_counter()
                for _ in range(200):
                    tr.vec_dot(n, ctypes.byref(out), 0, w.ctypes.data, 0, a_q8k.ctypes.data, 0, 1)
                best_ggml = min(best_ggml, (time.perf_counter() - t0) / 200)
        if comparable:
            g = out.value
            rel = abs(ours - g) / max(abs(g), 1e-30)
            gs, og = w.nbytes / best_ggml / 1e9, w.nbytes / best_ours / 1e9
            print(f"{K.TYPE_NAMES[t]:<8} {ours:>14.6e} {g:>14.6e} {rel:>9.1e} {og:>9.1f} {gs:>9.1f} {og / gs:>6.2f}")
        else:
            print(
                f"{K.TYPE_NAMES[t]:<8} {ours:>14.6e} {'-':>14} {'-':>9} {w.nbytes / best_ours / 1e9:>9.1f} {'-':>9} {'-':>6}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
