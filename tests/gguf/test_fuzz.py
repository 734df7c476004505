"""Seeded mutation fuzz of the reader: every outcome is a parse or a ModelFormatError.

10,000+ files per run: random byte flips, 64-bit fields rewritten with extreme values, spliced
headers and truncations, from two valid seeds. Each parse is timed and its allocations traced.
"""

from __future__ import annotations

import random
import struct
import time
import tracemalloc

from app.errors import LlambdaError, ModelFormatError
from app.gguf import open_gguf
from app.model import support_verdict
from tests.gguf.craft import small_valid
from tests.synth import TinySpec, write_tiny_model

N_MUTANTS = 10_000
MAX_SECONDS = 1.0
EXTREMES = [0, 1, 2, 3, 31, 32, 33, 63, 64, 255, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1]


def mutate(rng: random.Random, data: bytes, other: bytes) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:  # flip a few bytes
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:  # rewrite a 64-bit little-endian field
        pos = rng.randrange(0, len(b) - 8)
        b[pos : pos + 8] = struct.pack("<Q", rng.choice(EXTREMES))
    elif kind == 2:  # rewrite a 32-bit field (types, n_dims, version)
        pos = rng.randrange(0, len(b) - 4)
        b[pos : pos + 4] = struct.pack("<I", rng.choice(EXTREMES) & 0xFFFFFFFF)
    elif kind == 3:  # splice: the head of one file with the tail of the other
        cut_a, cut_b = rng.randrange(len(b)), rng.randrange(len(other))
        b = b[:cut_a] + other[cut_b:]
    else:  # truncate
        b = b[: rng.randrange(len(b))]
    return bytes(b)


def test_mutation_fuzz(tmp_path):
    model = write_tiny_model(tmp_path / "seed.gguf", TinySpec(n_layer=1, n_embd=32, n_ff=64)).read_bytes()
    seeds = [small_valid(), model[:8192]]  # the metadata and tensor table of a real-shaped model
    rng = random.Random(20261129)
    path = tmp_path / "m.gguf"
    outcomes = {"parsed": 0, "refused": 0}
    slowest = 0.0
    warm = tmp_path / "warm.gguf"  # first-time imports are not the parser's allocations
    warm.write_bytes(model)
    with open_gguf(warm) as f:
        support_verdict(f)
    tracemalloc.start()
    try:
        for i in range(N_MUTANTS):
            a = seeds[i % 2]
            data = mutate(rng, a, seeds[(i + 1) % 2])
            path.write_bytes(data)
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            t = time.perf_counter()
            try:
                with open_gguf(path) as f:
                    if i % 10 == 0:  # the inspect path too: a verdict or one of our errors
                        try:
                            support_verdict(f)
                        except LlambdaError:
                            pass
                outcomes["parsed"] += 1
            except ModelFormatError as e:
                assert "\n" not in str(e)
                outcomes["refused"] += 1
            slowest = max(slowest, time.perf_counter() - t)
            peak = tracemalloc.get_traced_memory()[1] - base
            assert peak < len(data) + 256 * 1024, f"mutant {i}: {peak} bytes allocated for a {len(data)}-byte file"
    finally:
        tracemalloc.stop()
    assert slowest < MAX_SECONDS
    assert outcomes["refused"] > N_MUTANTS // 2 and outcomes["parsed"] > 0, outcomes
