"""Build hook of the llambda package: compiles the kernel library into `app._llk` (cffi, API mode).

Metadata lives in pyproject.toml; this file only wires kernels/build_ffi.py in through
`cffi_modules` and compiles each C file of kernels/ with its own flags (the instruction-set files
with theirs, the reference and shared files with none), warnings on.
"""

import glob
import os
import platform
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "kernels"))
import build_ffi  # noqa: E402  (kernels/build_ffi.py)

KERNELS = os.path.join(HERE, "kernels")
# What a kernel file may include: headers, and the .inc fragments (kernel code compiled into more
# than one ISA file, e.g. llk_simd256.inc into llk_avx2.c and llk_avx512.c).
HEADERS = (".h", ".inc")


def _is_x86() -> bool:
    m = platform.machine().lower()
    return m in ("x86_64", "amd64", "i386", "i686", "x86")


class BuildKernels(build_ext):
    """build_ext that first compiles kernels/*.c into objects linked into app._llk."""

    def build_extension(self, ext):
        if ext.name == "app._llk":
            msvc = self.compiler.compiler_type == "msvc"
            common = build_ffi.MSVC_COMMON if msvc else build_ffi.GCC_COMMON
            objects = []
            for i, (src, macros, gcc_flags, msvc_flags) in enumerate(build_ffi.SOURCES):
                flags = msvc_flags if msvc else gcc_flags
                if not _is_x86():
                    flags = []  # the ISA files compile to stubs: reference path only
                out_dir = os.path.join(self.build_temp, "llk", str(i))
                objects += self.compiler.compile(
                    [os.path.join(KERNELS, src)],
                    output_dir=out_dir,
                    macros=macros,
                    include_dirs=[KERNELS],
                    extra_postargs=common + flags,
                    debug=self.debug,
                    depends=[os.path.join(KERNELS, h) for h in os.listdir(KERNELS) if h.endswith(HEADERS)],
                )
            ext.extra_objects = list(ext.extra_objects or []) + objects
            ext.depends = list(ext.depends or []) + [
                os.path.join(KERNELS, f) for f in os.listdir(KERNELS) if f.endswith((".c",) + HEADERS)
            ]
        super().build_extension(ext)


class BuildPyWithResources(build_py):
    """build_py that also copies resources/ (style sheets, icons, the self-test model) into the
    package as app/resources/, so a wheel carries them (app/bundled.py finds them there)."""

    def run(self):
        super().run()
        src = os.path.join(HERE, "resources")
        if os.path.isdir(src) and not getattr(self, "editable_mode", False):
            self.copy_tree(src, os.path.join(self.build_lib, "app", "resources"))


class SdistWithKernels(sdist):
    """sdist that carries the kernel sources (they are not Extension sources, see above)."""

    def make_distribution(self):
        for pattern in ("kernels/*.c", "kernels/*.h", "kernels/*.inc", "kernels/*.py", "resources/**/*"):
            self.filelist.extend(
                sorted(
                    f
                    for f in glob.glob(pattern, root_dir=HERE, recursive=True)
                    if os.path.isfile(os.path.join(HERE, f))
                )
            )
        super().make_distribution()


setup(
    cffi_modules=["kernels/build_ffi.py:ffi"],
    cmdclass={"build_ext": BuildKernels, "build_py": BuildPyWithResources, "sdist": SdistWithKernels},
)
