#!/bin/sh
# Build the double-click bundle: dist/Llambda/ (run Llambda inside it; Linux: linux/install.sh
# adds a menu entry and the .gguf association). Run from anywhere in a source checkout:
#
#   packaging/build_bundle.sh            build (uses .venv if present, else the current python)
#   packaging/build_bundle.sh --check    build, then run `Llambda --self-test` headless
#
# DIST and WORK move the output (default dist/) and PyInstaller's work folder (default build/).
# Installs the package (compiling the kernel library) and PyInstaller into that environment when
# they are missing. Takes about half a minute on two cores once the kernels are built.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

# The kernel library must sit in app/ of this tree (PyInstaller collects the package from here):
# an editable install compiles it in place and brings the dependencies.
ls app/_llk.* >/dev/null 2>&1 && "$PYTHON" -c "import app._llk, PySide6, tokenizers, sentencepiece" 2>/dev/null \
    || "$PYTHON" -m pip install -e .
"$PYTHON" -c "import PyInstaller" 2>/dev/null || "$PYTHON" -m pip install "pyinstaller>=6.3"
[ -f resources/selftest/tiny.gguf ] || { echo "build_bundle.sh: resources/selftest/tiny.gguf is missing (python packaging/make_selftest_model.py)" >&2; exit 1; }

start=$(date +%s)
"$PYTHON" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath "${DIST:-dist}" --workpath "${WORK:-build}" build.spec
dist=${DIST:-dist}/Llambda
if [ "$(uname -s)" = Linux ]; then
    mkdir -p "$dist/linux"
    cp packaging/linux/llambda.desktop packaging/linux/llambda-gguf.xml packaging/linux/install.sh "$dist/linux/"
    cp -R packaging/icons "$dist/linux/icons"
    rm -f "$dist/linux/icons/llambda.ico" "$dist/linux/icons/llambda.icns"
fi
echo "build_bundle.sh: $dist built in $(( $(date +%s) - start )) s, $(du -sh "$dist" | cut -f1)"

if [ "${1:-}" = "--check" ]; then
    QT_QPA_PLATFORM=offscreen "$dist/Llambda" --self-test
fi
