"""10,000 library calls in a row leave the process no bigger: no leak per call, in C or in glue."""

from __future__ import annotations

import gc

import numpy as np
import psutil

import app.kernels as K

N_CALLS = 10_000
MAX_GROWTH_BYTES = 4 << 20  # allocator noise; a leak of even 1 KiB per call would be 10 MB


def test_ten_thousand_calls_no_memory_growth():
    proc = psutil.Process()
    t, n = 3, 576
    w = K.random_weights(t, 64, n)
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    q = np.random.default_rng(1).standard_normal((1, 4, 64)).astype(np.float32)
    kv = np.random.default_rng(2).standard_normal((8, 2, 64)).astype(np.float16)
    cfg = K.AttentionConfig(4, 2, 64)
    rope = K.RopeConfig(64)
    out = np.empty(64, np.float32)
    with K.ThreadPool(2) as pool:

        def burst(count):
            for i in range(count):
                K.matvec(pool, t, w, n, x, out=out)  # allocates activations in C each call
                if i % 4 == 0:
                    K.dequantize_row(t, w[0], n)
                    K.attention(pool, cfg, q, kv, kv, [7])
                    K.rope(rope, q, [i])

        burst(500)  # warm up caches, arenas
        gc.collect()
        before = proc.memory_info().rss
        burst(N_CALLS)
        gc.collect()
        growth = proc.memory_info().rss - before
    assert growth < MAX_GROWTH_BYTES, f"RSS grew by {growth} bytes over {N_CALLS} calls"
