"""The decoder's packed weights on the real SmolLM2 model (Q4_1): the avx2 level packs every
matrix, the packed copy replaces the file's mapped pages instead of adding to them, and the
logits stay those of the reference level bit for bit (held for every prompt and level in
test_decoder_smollm2.py; here for a prompt long enough to leave every register-tile remainder)."""

from __future__ import annotations

import os

import numpy as np
import psutil
import pytest

import app.kernels as K
from app.engine.decoder import CDecoder
from app.gguf import open_gguf
from app.model import config_from_gguf

pytestmark = pytest.mark.skipif(
    "avx2" not in K.ISA_NAMES[: K.best_isa_level() + 1],
    reason="this CPU has no AVX2 (the reference level packs nothing)",
)


def test_avx2_packs_and_the_copy_replaces_the_mapped_pages(smollm2_path):
    f = open_gguf(smollm2_path)
    try:
        cfg = config_from_gguf(f)
        rss = psutil.Process().memory_info().rss
        d = CDecoder(f, cfg, n_ctx=64, n_threads=2, isa="avx2")
        grown = psutil.Process().memory_info().rss - rss
        # every weight is Q4_1 with a row count divisible by 8: all of them are packed (the tied
        # output too), about the file's size
        assert d.packed_bytes > 0.9 * f.file_size
        # the pages read while packing were given back: the process grew by the copy (and the
        # KV cache and scratch), not by the copy plus the file
        assert grown < d.packed_bytes + 0.3 * f.file_size, (grown, d.packed_bytes, f.file_size)
        ref = CDecoder(f, cfg, n_ctx=64, n_threads=1, isa="ref")
        assert ref.packed_bytes == 0
        ids = [int(t) for t in np.random.default_rng(5).integers(0, cfg.n_vocab, 23)]
        got = d.decode(ids, 0, all_logits=True)
        want = ref.decode(ids, 0, all_logits=True)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
        d.close()
        ref.close()
    finally:
        f.close()


def _rss_file_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("RssFile:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssFile in /proc/self/status")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux /proc: the mapped pages counted")
def test_a_pass_does_not_map_the_released_pages_back(smollm2_path):
    """The norms between the packed weights are the decoder's own copies: a pass reads nothing of
    the released mapping (measured before: the first decode mapped 54 MB of the file back, whole
    page-cache folios around each norm it read)."""
    f = open_gguf(smollm2_path)
    try:
        with CDecoder(f, config_from_gguf(f), n_ctx=64, n_threads=2, isa="avx2") as d:
            before = _rss_file_mb()
            d.decode([1, 2, 3, 4, 5, 6, 7, 8], 0)
            d.decode([9], 8)
            assert _rss_file_mb() - before < 8, (before, _rss_file_mb())
    finally:
        f.close()


def _mapped_mb(path) -> float:
    """Resident megabytes of the mappings of `path` in this process (/proc/self/smaps)."""
    name, kb, inside = os.path.realpath(path), 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:  # a mapping's first line
            inside = len(head) >= 6 and head[5] == name
        elif inside and head[0] == "Rss:":
            kb += int(head[1])
    return kb / 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux /proc: the mapped pages counted")
def test_reading_embedding_rows_does_not_keep_the_file_mapped(smollm2_path):
    """SmolLM2's output is its token embedding (tied), packed: the embedding rows a batch reads
    from the mapping are given back after it, with the page-cache folios around them. Measured
    before: tokens from across the vocabulary mapped the whole 17.7 MB embedding back beside its
    packed copy (a tied 1B model's is 200 MB and more, mapped back as a chat goes on)."""
    f = open_gguf(smollm2_path)
    try:
        cfg = config_from_gguf(f)
        with CDecoder(f, cfg, n_ctx=256, n_threads=2, isa="avx2") as d:
            before = _mapped_mb(smollm2_path)
            spread = [int(t) for t in np.linspace(0, cfg.n_vocab - 1, 96)]
            d.decode(spread[:64], 0)  # a prompt's batch
            for i, t in enumerate(spread[64:]):  # generated tokens, one at a time
                d.decode([t], 64 + i)
            after = _mapped_mb(smollm2_path)
            assert after - before < 2, (before, after)
    finally:
        f.close()
