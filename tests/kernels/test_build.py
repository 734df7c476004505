"""The C sources build warning-free at -Wall -Wextra, each with its own ISA flags (as setup.py
builds them), with every C compiler found here (gcc, clang)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
sys.path.insert(0, str(KERNELS))
import build_ffi  # noqa: E402

COMPILERS = [c for c in ("gcc", "clang") if shutil.which(c)]


@pytest.mark.skipif(not COMPILERS, reason="no gcc or clang on this machine")
@pytest.mark.parametrize("cc", COMPILERS)
def test_sources_compile_without_warnings(cc, tmp_path):
    for i, (src, macros, flags, _msvc) in enumerate(build_ffi.SOURCES):
        defs = [f"-D{k}={v}" for k, v in macros]
        cmd = [cc, "-c", "-fPIC", *build_ffi.GCC_COMMON, "-Werror", *flags, *defs, f"-I{KERNELS}",
               str(KERNELS / src), "-o", str(tmp_path / f"{i}.o")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr[-3000:]}"


def test_cdef_region_parses():
    """The public header's cdef region is what cffi sees; it must stay plain declarations."""
    from cffi import FFI
    FFI().cdef(build_ffi.cdef_text())
