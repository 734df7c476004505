"""The C sources build warning-free at -Wall -Wextra, each with its own ISA flags (as setup.py
builds them), with every C compiler found here (gcc, clang), and for Windows with MinGW-w64
where it is installed (the Win32 half of the threads shim; compiled, not run)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
sys.path.insert(0, str(KERNELS))
import build_ffi  # noqa: E402

CLANG = next((c for c in ("clang", *(f"clang-{v}" for v in range(20, 12, -1))) if shutil.which(c)), None)
COMPILERS = [c for c in ("gcc", CLANG, "x86_64-w64-mingw32-gcc") if c and shutil.which(c)]


@pytest.mark.skipif(not COMPILERS, reason="no gcc or clang on this machine")
@pytest.mark.parametrize("cc", COMPILERS)
def test_sources_compile_without_warnings(cc, tmp_path):
    for i, (src, macros, flags, _msvc) in enumerate(build_ffi.SOURCES):
        defs = [f"-D{k}={v}" for k, v in macros]
        pic = [] if "mingw" in cc else ["-fPIC"]
        cmd = [
            cc,
            "-c",
            *pic,
            *build_ffi.GCC_COMMON,
            "-Werror",
            *flags,
            *defs,
            f"-I{KERNELS}",
            str(KERNELS / src),
            "-o",
            str(tmp_path / f"{i}.o"),
        ]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr[-3000:]}"


def test_cdef_region_parses():
    """The public header's cdef region is what cffi sees; it must stay plain declarations."""
    from cffi import FFI

    FFI().cdef(build_ffi.cdef_text())
