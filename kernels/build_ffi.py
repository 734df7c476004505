"""cffi build script of the kernel library: the `app._llk` extension module (API mode).

cffi compiles only the generated glue here; the C sources themselves are compiled by setup.py's
build_ext, each instruction-set file with its own flags (see `SOURCES`), so that no file built
for AVX-512 can leak such instructions into code that runs before dispatch.
"""

from __future__ import annotations

import os
import re

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "llk.h")

# (source, extra macros, gcc/clang flags, MSVC flags). The reference and shared files get no ISA
# flags at all: they must run on any x86-64 (and any other) CPU.
_GCC_AVX2 = ["-mavx2", "-mfma", "-mf16c"]
_GCC_AVX512 = _GCC_AVX2 + ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq"]
SOURCES = [
    ("llk_ref.c", [], [], []),
    ("llk_ref_iq.c", [], [], []),
    ("llk_dispatch.c", [], [], []),
    ("llk_pool.c", [], [], []),
    ("llk_ops.c", [], [], []),
    ("llk_panel.c", [], [], []),
    ("llk_decode.c", [], [], []),
    ("llk_sample.c", [], [], []),
    ("llk_generate.c", [], [], []),
    ("llk_avx2.c", [], _GCC_AVX2, ["/arch:AVX2"]),
    ("llk_avx2.c", [("LLK_AVXVNNI", "1")], _GCC_AVX2 + ["-mavxvnni"], ["/arch:AVX2"]),
    ("llk_avx512.c", [], _GCC_AVX512, ["/arch:AVX512"]),
    ("llk_avx512.c", [("LLK_VNNI", "1")], _GCC_AVX512 + ["-mavx512vnni"], ["/arch:AVX512"]),
]

# -ffp-contract=off (MSVC: /fp:precise, which fuses nothing since Visual Studio 2022 17.0): no
# a * b + c silently fused. Every ISA level must compute the same floats bit for bit
# (tests/kernels/test_bitexact.py), so each FMA is written where it is meant.
GCC_COMMON = ["-std=c11", "-O3", "-Wall", "-Wextra", "-fno-strict-aliasing", "-D_GNU_SOURCE", "-ffp-contract=off"]
MSVC_COMMON = ["/O2", "/W3", "/experimental:c11atomics", "/std:c11", "/fp:precise"]


def cdef_text() -> str:
    """The declarations between the LLK_CDEF markers of llk.h, which cffi's cdef() accepts."""
    with open(HEADER, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"/\* LLK_CDEF_BEGIN \*/(.*)/\* LLK_CDEF_END \*/", text, re.S)
    if not m:
        raise RuntimeError("llk.h: LLK_CDEF markers not found")
    return m.group(1)


ffi = FFI()
ffi.cdef(cdef_text())
ffi.set_source(
    "app._llk",
    '#include "llk.h"\n',
    include_dirs=[HERE],
    libraries=[] if os.name == "nt" else ["m", "pthread"],
)

if __name__ == "__main__":
    ffi.compile(verbose=True)
