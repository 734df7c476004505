"""The attention kernels alone, over a cache laid out as the decoder holds it (float16 or Q8_0,
blocks of 256 positions, head after head in each), at each ISA level. Prints one line per level.

    python -m scripts.bench_attention [--mode prompt|decode] [--depth 4096] [--tokens 512]
                                      [--layers 16] [--levels avx2,avx512] [--threads 2] [--reps 7]
                                      [--kv-type f16|q8_0]

prompt: --tokens new tokens at positions depth .. depth + tokens - 1 against one layer's cache
(what each layer of `llambda bench --pp 512 --depth 4096` runs); median ms per layer.
decode: one token at position depth - 1, once against each of --layers layers' caches (16 of the
1B shape at depth 4096 are 128 MB, so they come from memory as in generation); median ms per
token and the caches' bytes read per second. The shape defaults to Llama 3.2 1B's attention
(32 query heads, 8 KV heads, head size 64). The caches hold random values: speed does not depend
on them.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("prompt", "decode"), default="decode")
    p.add_argument("--depth", type=int, default=4096)
    p.add_argument("--tokens", type=int, default=512, help="new tokens of a prompt")
    p.add_argument("--layers", type=int, default=16, help="caches a decoded token goes through")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument(
        "--levels",
        default="avx2,avx512",
        help="comma-separated ISA levels (ref, avx2, avx512; missing ones are skipped; LLAMBDA_ISA=avx2-novnni "
        "runs AVX2 without AVX-VNNI)",
    )
    p.add_argument("--kv-type", choices=("f16", "q8_0"), default="f16", help="the caches' type (as --kv-type)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args(argv)

    import numpy as np

    import app.kernels as K

    block = 256  # the decoder's blocks (KV_BLOCK in kernels/llk_decode.c)
    cfg = K.AttentionConfig(n_head=args.heads, n_head_kv=args.kv_heads, head_dim=args.head_dim)
    rng = np.random.default_rng(0)
    prompt = args.mode == "prompt"
    n_kv = args.depth + args.tokens if prompt else args.depth
    n_tok = args.tokens if prompt else 1
    layers = 1 if prompt else args.layers
    shape = (n_kv, args.kv_heads, args.head_dim)
    caches = []
    for _ in range(layers):
        k, v = (rng.standard_normal(shape).astype(np.float16) for _ in range(2))
        if args.kv_type == "q8_0":
            k, v = (K.quantize_kv_q8_0(x.reshape(n_kv, -1)) for x in (k, v))
        caches.append((k, v, (K.kv_blocked(k, args.kv_heads, block), K.kv_blocked(v, args.kv_heads, block))))
    q = rng.standard_normal((n_tok, args.heads, args.head_dim)).astype(np.float32)
    pos = np.arange(n_kv - n_tok, n_kv, dtype=np.int32)
    cache_bytes = sum(k.nbytes + v.nbytes for k, v, _ in caches)
    # decode: 8 tokens per timing, so a round is not one short interval; each call costs ~15 us
    # beside the kernels (Intel Xeon), ~2% of the default token (16 calls, ~10 ms)
    inner = 1 if prompt else 8
    with K.ThreadPool(args.threads) as pool:
        for level in args.levels.split(","):
            if level not in K.ISA_NAMES:
                p.error(f"unknown level {level!r}; one of {', '.join(K.ISA_NAMES)}")
            if K.ISA_NAMES.index(level) > K.best_isa_level():
                print(f"{level}: not on this CPU, skipped")
                continue
            name = K.isa_name(K.ISA_NAMES.index(level))
            times = []
            for _ in range(args.reps + 1):  # the first round warms up
                t0 = time.perf_counter()
                for _ in range(inner):
                    for k, v, pre in caches:
                        K.attention(pool, cfg, q, k, v, pos, isa=level, kv_block=block, blocked=pre)
                times.append((time.perf_counter() - t0) / inner)
            med = statistics.median(times[1:])
            if prompt:
                print(
                    f"{name}: prompt of {n_tok} at depth {args.depth}, one layer: {1e3 * med:.1f} ms "
                    f"(runs {', '.join(f'{1e3 * t:.1f}' for t in times[1:])})"
                )
            else:
                print(
                    f"{name}: one token at depth {args.depth}, {layers} layers: {1e3 * med:.2f} ms, "
                    f"{cache_bytes / med / 1e9:.1f} GB/s of cache "
                    f"(runs {', '.join(f'{1e3 * t:.2f}' for t in times[1:])})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
