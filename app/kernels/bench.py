"""Measurement of the kernel library: matrix x vector speed per tensor type against the
machine's read bandwidth (what `llambda bench --kernels` prints), matrix x matrix GFLOP/s, the
dot kernels' in-cache speed, and random rows with sane scales for timing and tests.

    python -m app.kernels [--threads 1,2] [--types q4_0,q8_0,q4_k] [--matmul | --in-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Callable, Iterable, Sequence

import numpy as np

from app.errors import KernelError
from app.kernels import (
    SUPPORTED_TYPES,
    TYPE_NAMES,
    ThreadPool,
    _isa,
    _pool_ptr,
    _type,
    best_isa_level,
    cpu_count_physical,
    ffi,
    isa_name,
    isa_packs,
    lib,
    matmul,
    matmul_packed,
    matvec,
    pack,
    quantize_activations,
    row_bytes,
    version,
)

# Where each type keeps its float16 scale fields inside a block (byte offsets): the benchmark fills
# random blocks and makes these sane so no NaN or infinity reaches the arithmetic.
# Byte offsets of the float16 scales in a block (IQ1_M: the four u16 whose top nibbles hold d;
# MXFP4: its one-byte exponent), for random rows with sane scales.
SCALE_OFFSETS = {
    2: (0,),
    3: (0, 2),
    6: (0,),
    7: (0, 2),
    8: (0,),
    10: (80, 82),
    11: (108,),
    12: (0, 2),
    13: (0, 2),
    14: (208,),
    16: (0,),
    17: (0,),
    18: (0,),
    19: (0,),
    20: (0,),
    21: (0,),
    22: (0,),
    23: (0,),
    29: (48, 50, 52, 54),
    34: (52,),
    35: (64,),
    39: (0,),
}


def random_weights(type_id: int, n_rows: int, n_cols: int, seed: int = 0) -> np.ndarray:
    """(n_rows, row_bytes) uint8: random rows of the type with finite scales (for timing, tests)."""
    t = _type(type_id)
    rng = np.random.default_rng(seed)
    rb = row_bytes(t, n_cols)
    if t in (0, 1, 30):
        v = rng.standard_normal((n_rows, n_cols), dtype=np.float32)
        if t == 1:
            v = v.astype(np.float16)
        elif t == 30:
            v = (v.view(np.uint32) >> 16).astype(np.uint16)
        return np.ascontiguousarray(v).view(np.uint8).reshape(n_rows, rb)
    w = rng.integers(0, 256, size=(n_rows, rb), dtype=np.uint8)
    bb = int(lib.llk_type_block_bytes(t))
    blocks = w.reshape(n_rows, rb // bb, bb)
    scale = np.frombuffer(np.float16(1.0 / 64).tobytes(), dtype=np.uint8)
    if t == 29:  # IQ1_M: d = 1/64 (0x2400) spread over the top nibbles of the four scale words
        sw = blocks[:, :, 48:56].copy().view(np.uint16) & np.uint16(0x0FFF)
        sw |= np.array([0x0000, 0x0000, 0x4000, 0x2000], dtype=np.uint16)
        blocks[:, :, 48:56] = sw.view(np.uint8)
        return w
    if t == 39:  # MXFP4: exponent byte 121, a scale of 2^-7
        blocks[:, :, 0] = 121
        return w
    for off in SCALE_OFFSETS[t]:
        blocks[:, :, off : off + 2] = scale
    return w


def read_bandwidth(pool: ThreadPool | None, n_bytes: int = 256 << 20, reps: int = 3) -> float:
    """Read bandwidth in bytes/s: the best of `reps` passes over an n_bytes buffer."""
    buf = np.ones(max(64, n_bytes) // 8, dtype=np.uint64)
    ptr = ffi.from_buffer(buf)
    lib.llk_read_bandwidth_probe(_pool_ptr(pool), ptr, buf.nbytes, 1)  # page in, warm up
    best = float("inf")
    for _ in range(max(1, reps)):
        dt = lib.llk_read_bandwidth_probe(_pool_ptr(pool), ptr, buf.nbytes, 1)
        if dt < 0:
            raise KernelError("read_bandwidth: probe failed")
        best = min(best, dt)
    return buf.nbytes / best


def int8_peak(pool: ThreadPool | None, isa: int | str | None = None, n_iter: int = 20000, reps: int = 3) -> float:
    """The integer peak: 8-bit operations per second (a multiply-add counts two) of the level's
    widest 8-bit multiply-add instruction on every thread of the pool, nothing else running
    (AVX2: vpmaddubsw; AVX-512: vpdpbusd with VNNI, else vpmaddubsw on 512 bits); the best of
    `reps` runs after a warm-up. 0.0 at the reference level, which has no such instruction."""
    level = _isa(isa)
    lib.llk_int8_peak_probe(_pool_ptr(pool), level, n_iter)  # warm up (clock, pool threads)
    best = 0.0
    for _ in range(max(1, reps)):
        ops = lib.llk_int8_peak_probe(_pool_ptr(pool), level, n_iter)
        if ops < 0:
            raise KernelError("int8_peak: probe failed")
        best = max(best, ops)
    return best


BENCH_TYPES = (2, 3, 8, 12, 13, 14, 6, 7, 10, 11, 20, 23, 1, 30, 0)


def bench_kernels(
    threads: Sequence[int] = (1, 2),
    types: Iterable[int] | None = None,
    n_bytes: int = 128 << 20,
    n_cols: int = 4096,
    reps: int = 10,
    isa: int | str | None = None,
) -> list[dict]:
    """Matrix x vector weight bytes/s per type and thread count, next to the read bandwidth.

    The matrix holds about n_bytes of weights (default 128 MiB: larger than any desktop L3), so
    the product streams from memory as in decoding. Where the level packs the type, the packed
    panels are timed too: that is what the decoder runs, for generation as for prompts. Timings of
    the products and of the bandwidth probe alternate, `reps` rounds of each; each figure is the
    best round (other processes on a shared machine only ever slow a round down). The bandwidth is
    the best over the whole run. One dict per (type, threads): type, type_id, threads, isa, n_rows,
    n_cols, bytes, seconds, bytes_per_s (the rows), packed_bytes_per_s (None where the level does
    not pack), bandwidth_bytes_per_s, fraction (of the bandwidth, for what decoding runs: the
    panels where there are any), int8_peak_ops_per_s (int8_peak on the same threads).
    """
    types = [t for t in (BENCH_TYPES if types is None else types) if t in SUPPORTED_TYPES]
    level = _isa(isa)
    pools = {n: ThreadPool(n) for n in threads}
    buf = np.ones(max(64, n_bytes) // 8, dtype=np.uint64)
    bptr = ffi.from_buffer(buf)
    bandwidth = {n: 0.0 for n in pools}

    def probe(n: int) -> None:
        dt = lib.llk_read_bandwidth_probe(pools[n].ptr, bptr, buf.nbytes, 1)
        if dt > 0:
            bandwidth[n] = max(bandwidth[n], buf.nbytes / dt)

    results: list[tuple[int, int, int, int, float, float | None]] = []  # type, threads, rows, bytes, s, packed s
    try:
        peaks = {n: int8_peak(pool, level) for n, pool in pools.items()}
        for n in pools:
            probe(n)  # page the buffer in
        x = np.random.default_rng(1).standard_normal(n_cols, dtype=np.float32)
        for t in types:
            n_rows = max(8, n_bytes // row_bytes(t, n_cols) // 8 * 8)  # whole panels of 8 rows
            w = random_weights(t, n_rows, n_cols, seed=t)
            y = np.empty(n_rows, dtype=np.float32)
            best = {n: float("inf") for n in pools}
            pk = pack(next(iter(pools.values())), t, w, n_cols) if isa_packs(t, level) else None
            best_p = {n: float("inf") for n in pools}
            for n, pool in pools.items():
                matvec(pool, t, w, n_cols, x, isa=level, out=y)  # warm up
                if pk is not None:
                    matmul_packed(pool, t, pk, n_rows, n_cols, x[None, :], isa=level)
            for _ in range(max(1, reps)):
                for n, pool in pools.items():
                    probe(n)
                    t0 = time.perf_counter()
                    matvec(pool, t, w, n_cols, x, isa=level, out=y)
                    best[n] = min(best[n], time.perf_counter() - t0)
                    if pk is not None:
                        t0 = time.perf_counter()
                        matmul_packed(pool, t, pk, n_rows, n_cols, x[None, :], isa=level)
                        best_p[n] = min(best_p[n], time.perf_counter() - t0)
            results += [(t, n, n_rows, int(w.nbytes), best[n], None if pk is None else best_p[n]) for n in pools]
            del w, pk
        sizes = {n: p.size for n, p in pools.items()}
    finally:
        for p in pools.values():
            p.close()
    name = isa_name(level if level >= 0 else None)
    return [
        dict(
            type=TYPE_NAMES[t],
            type_id=t,
            threads=sizes[n],
            isa=name,
            n_rows=n_rows,
            n_cols=n_cols,
            bytes=nb,
            seconds=sec,
            bytes_per_s=nb / sec,
            packed_bytes_per_s=None if psec is None else nb / psec,
            bandwidth_bytes_per_s=bandwidth[n],
            fraction=nb / (sec if psec is None else psec) / bandwidth[n],
            int8_peak_ops_per_s=peaks[n],
        )
        for t, n, n_rows, nb, sec, psec in results
    ]


def bench_matmul(
    threads: Sequence[int] = (1, 2),
    types: Iterable[int] | None = None,
    n_tok: int = 64,
    n_rows: int = 2048,
    n_cols: int = 2048,
    reps: int = 5,
    isa: int | str | None = None,
) -> list[dict]:
    """Matrix x matrix (prompt processing) speed per type: GFLOP/s of (n_tok x n_cols) x W^T with
    W n_rows x n_cols (~1-4 MiB: the weights stay in cache, the kernels are compute-bound), from
    the rows as read and, where the level packs the type (what the decoder runs for prompts), from
    the packed panels. One dict per (type, threads): type, type_id, threads, isa, n_tok, n_rows,
    n_cols, seconds, gflops (the rows), packed_gflops (None where the level does not pack), and
    peak_gops (int8_peak on the same threads; 0.0 at the reference level)."""
    types = [t for t in (BENCH_TYPES if types is None else types) if t in SUPPORTED_TYPES]
    level = _isa(isa)
    x = np.random.default_rng(2).standard_normal((n_tok, n_cols), dtype=np.float32)
    y = np.empty((n_tok, n_rows), dtype=np.float32)
    out = []
    pools = {n: ThreadPool(n) for n in threads}

    def best_of(run: Callable[[], object]) -> float:
        run()
        best = float("inf")
        for _ in range(max(1, reps)):
            t0 = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - t0)
        return best

    try:
        peaks = {n: int8_peak(pool, level) for n, pool in pools.items()}
        for t in types:
            w = random_weights(t, n_rows, n_cols, seed=t)
            packs = n_rows % 8 == 0 and isa_packs(t, level)
            for n, pool in pools.items():
                best = best_of(lambda: matmul(pool, t, w, n_cols, x, isa=level, out=y))
                packed = None
                if packs:
                    p = pack(pool, t, w, n_cols)
                    packed = best_of(lambda: matmul_packed(pool, t, p, n_rows, n_cols, x, isa=level))
                flop = 2.0 * n_tok * n_rows * n_cols
                out.append(
                    dict(
                        type=TYPE_NAMES[t],
                        type_id=t,
                        threads=pool.size,
                        isa=isa_name(level if level >= 0 else None),
                        n_tok=n_tok,
                        n_rows=n_rows,
                        n_cols=n_cols,
                        seconds=best,
                        gflops=flop / best / 1e9,
                        packed_gflops=None if packed is None else flop / packed / 1e9,
                        peak_gops=peaks[n] / 1e9,
                    )
                )
    finally:
        for tp in pools.values():
            tp.close()
    return out


def bench_in_cache(
    types: Iterable[int] | None = None,
    levels: Iterable[int | str] | None = None,
    n_rows: int = 32,
    n_cols: int = 4096,
    inner: int = 50,
    reps: int = 10,
) -> list[dict]:
    """The dot kernels' own speed, weights in cache (one thread, a C loop, no Python per call):
    weight bytes/s per type and ISA level. Shows how much faster than memory a kernel can go."""
    types = [t for t in (BENCH_TYPES if types is None else types) if t in SUPPORTED_TYPES]
    isa_levels = [_isa(v) for v in (range(1, best_isa_level() + 1) if levels is None else levels)]
    x = np.random.default_rng(3).standard_normal(n_cols, dtype=np.float32)
    out = []
    for t in types:
        w = random_weights(t, n_rows, n_cols, seed=t)
        for lv in isa_levels:
            a = quantize_activations(t, x, isa=lv)
            sec = lib.llk_bench_vec_dot(
                lv, t, ffi.from_buffer(w), w.strides[0], n_rows, n_cols, ffi.from_buffer(a), inner, reps
            )
            if sec <= 0:
                raise KernelError(f"bench_in_cache: {TYPE_NAMES[t]} at level {lv} failed")
            out.append(dict(type=TYPE_NAMES[t], type_id=t, isa=isa_name(lv), bytes_per_s=w.nbytes * inner / sec))
    return out


def format_bench(rows: list[dict]) -> str:
    """A plain-text table of bench_kernels() results: GB/s of the rows and of the packed panels
    (what the decoder runs where the level packs the type), the read bandwidth, the share of it
    decoding gets, and a last line with the level's int8 peak per thread count."""
    lines = [
        f"{'type':<7} {'thr':>3} {'isa':<12} {'MiB':>6} {'ms':>8} {'GB/s':>7} {'packed':>7} {'read GB/s':>9} {'of bw':>6}"
    ]
    peaks: dict[int, float] = {}
    for r in rows:
        packed = "-" if r.get("packed_bytes_per_s") is None else f"{r['packed_bytes_per_s'] / 1e9:.2f}"
        lines.append(
            f"{r['type']:<7} {r['threads']:>3} {r['isa']:<12} {r['bytes'] / 2**20:>6.0f} "
            f"{r['seconds'] * 1e3:>8.2f} {r['bytes_per_s'] / 1e9:>7.2f} {packed:>7} "
            f"{r['bandwidth_bytes_per_s'] / 1e9:>9.2f} {100 * r['fraction']:>5.0f}%"
        )
        peaks[r["threads"]] = r.get("int8_peak_ops_per_s") or 0.0
    if any(v > 0 for v in peaks.values()):
        each = ", ".join(f"{n} thread{'s' if n > 1 else ''} {v / 1e9:.0f}" for n, v in sorted(peaks.items()))
        lines.append(f"int8 peak, GOP/s (the ceiling of the prompt kernels at this level): {each}")
    return "\n".join(lines)


def format_bench_matmul(rows: list[dict]) -> str:
    """A plain-text table of bench_matmul() results."""
    lines = [
        f"{'type':<7} {'thr':>3} {'isa':<12} {'tokens':>6} {'ms':>8} {'GFLOP/s':>8} {'packed':>8} "
        f"{'int8 peak':>9} {'of peak':>7}"
    ]
    for r in rows:
        packed = "-" if r.get("packed_gflops") is None else f"{r['packed_gflops']:.1f}"
        best = max(r["gflops"], r.get("packed_gflops") or 0.0)
        peak = r.get("peak_gops") or 0.0
        of_peak = f"{100 * best / peak:.0f}%" if peak > 0 else "-"
        lines.append(
            f"{r['type']:<7} {r['threads']:>3} {r['isa']:<12} {r['n_tok']:>6} "
            f"{r['seconds'] * 1e3:>8.2f} {r['gflops']:>8.1f} {packed:>8} {peak:>9.0f} {of_peak:>7}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:  # python -m app.kernels [--types Q4_0,...]
    ap = argparse.ArgumentParser(prog="python -m app.kernels", description="kernel benchmark")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--types", default=None, help="comma-separated type names (default: all)")
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--isa", default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--matmul", action="store_true", help="matrix x matrix GFLOP/s instead")
    ap.add_argument("--in-cache", action="store_true", help="the dot kernels' in-cache speed instead")
    args = ap.parse_args(argv)
    by_name = {v: k for k, v in TYPE_NAMES.items()}
    types = None if not args.types else [by_name[s.strip().upper()] for s in args.types.split(",")]
    threads = [int(s) for s in args.threads.split(",")]
    if args.in_cache:
        rows = bench_in_cache(types, None if args.isa is None else [args.isa])
        if args.json:
            print(json.dumps(rows, indent=1))
        else:
            for r in rows:
                print(f"{r['type']:<7} {r['isa']:<12} {r['bytes_per_s'] / 1e9:7.1f} GB/s in cache")
        return 0
    if args.matmul:
        rows = bench_matmul(threads, types, reps=args.reps, isa=args.isa)
        print(json.dumps(rows, indent=1) if args.json else format_bench_matmul(rows))
        return 0
    rows = bench_kernels(threads, types, args.mib << 20, reps=args.reps, isa=args.isa)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
        print(
            f"kernels {version()}, isa {isa_name()}, {cpu_count_physical()} cores, "
            f"load average {load[0]:.2f} (other processes slow the figures down)"
        )
        print(format_bench(rows))
    return 0
