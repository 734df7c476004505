"""Dispatch and type traits: levels, LLAMBDA_ISA forcing, supported types, argument checks."""
from __future__ import annotations

import os
import subprocess
import sys

import gguf
import numpy as np
import pytest

import app.kernels as K
from app.errors import KernelError
from tests.kernels.helpers import ALL_TYPES, LEVELS


def test_supported_types_are_the_fifteen():
    assert K.SUPPORTED_TYPES == frozenset(ALL_TYPES)


@pytest.mark.parametrize("t", ALL_TYPES)
def test_block_sizes_match_gguf(t):
    bs, bb = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(t)]
    assert K.block_size(t) == bs
    assert K.row_bytes(t, bs * 7) == bb * 7


def test_isa_name_is_a_level():
    assert K.isa_name() in ("ref", "avx2", "avx512", "avx512-vnni")
    assert 0 <= K.isa_level() <= K.best_isa_level()


def _isa_in_child(value: str | None) -> str:
    env = dict(os.environ)
    env.pop("LLAMBDA_ISA", None)
    if value is not None:
        env["LLAMBDA_ISA"] = value
    r = subprocess.run([sys.executable, "-c", "import app.kernels as k; print(k.isa_level())"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize("level", LEVELS)
def test_env_forces_a_lower_level(level):
    assert int(_isa_in_child(level)) == K.ISA_NAMES.index(level)


def test_env_cannot_raise_or_break():
    best = K.best_isa_level()
    assert int(_isa_in_child("avx512")) == min(best, 2)
    assert int(_isa_in_child("bogus")) == best


def test_bad_arguments_raise_kernel_error():
    with pytest.raises(KernelError):
        K.dequantize_row(5, np.zeros(64, np.uint8), 32)          # type 5 (Q4_2) is gone
    with pytest.raises(KernelError):
        K.dequantize_row(2, np.zeros(64, np.uint8), 33)          # not a block multiple
    with pytest.raises(KernelError):
        K.dequantize_row(2, np.zeros(10, np.uint8), 32)          # too few bytes
    with pytest.raises(KernelError):
        K.vec_dot(2, np.zeros(18, np.uint8), np.zeros(8, np.uint8), 32)
    with pytest.raises(KernelError):
        K.dequantize_row(2, np.zeros(18, np.uint8), 32, isa="sse9")
    assert issubclass(K.KernelAborted, KernelError)
