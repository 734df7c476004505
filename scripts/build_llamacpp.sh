#!/usr/bin/env bash
# Build the llama.cpp binaries the speed comparison runs (llama-bench, llama-quantize), from the
# llama.cpp source that llama-cpp-python's sdist vendors, into the benchmark cache:
#
#   $LLAMBDA_BENCH_CACHE/llama.cpp/<version>/src      unpacked source (vendor/llama.cpp)
#   $LLAMBDA_BENCH_CACHE/llama.cpp/<version>/native   -DGGML_NATIVE=ON  (everything this CPU has)
#   $LLAMBDA_BENCH_CACHE/llama.cpp/<version>/avx2     AVX2+FMA+F16C(+BMI2), AVX-512 off
#   $LLAMBDA_BENCH_CACHE/llama.cpp/<version>/avxvnni  avx2 plus AVX-VNNI (ggml's GGML_AVX_VNNI)
#   $LLAMBDA_BENCH_CACHE/llama.cpp/<version>/avx512   the AVX-512 extensions this CPU has, AMX off
#
# usage: scripts/build_llamacpp.sh [native|avx2|avxvnni|avx512 ...]
#        (default: native and avx2, avxvnni where the CPU has AVX-VNNI, avx512 where it has AVX-512)
# env:   LLAMBDA_BENCH_CACHE (default ~/.cache/llambda-bench), LLAMA_CPP_PYTHON_VERSION (0.3.36),
#        PYTHON (the python whose pip downloads the sdist; default python3), JOBS (default nproc)
#
# On a CPU without AVX-512 native and avx2 are the same code; both are still built so that the
# benchmark script finds the same layout on every machine. On a CPU with AMX (Intel Xeon since
# Sapphire Rapids) the native build multiplies prompts on the AMX tiles, which no level of ours
# uses: avx512 is the like-for-like build for our avx512 level there. Nothing of llama.cpp is
# committed.
set -euo pipefail

CACHE=${LLAMBDA_BENCH_CACHE:-$HOME/.cache/llambda-bench}
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
PY=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
BASE=$CACHE/llama.cpp/$VERSION
SRC=$BASE/src
LEVELS=("$@")
if [ ${#LEVELS[@]} -eq 0 ]; then
    LEVELS=(native avx2)
    grep -qw avx_vnni /proc/cpuinfo 2>/dev/null && LEVELS+=(avxvnni)
    grep -qw avx512f /proc/cpuinfo 2>/dev/null && LEVELS+=(avx512)
fi

for level in "${LEVELS[@]}"; do
    case $level in native|avx2|avxvnni|avx512) ;;
        *) echo "unknown level '$level' (native, avx2, avxvnni or avx512)" >&2; exit 2;; esac
done

if [ ! -f "$SRC/CMakeLists.txt" ]; then
    mkdir -p "$BASE"
    dl=$(mktemp -d "$BASE/dl.XXXXXX")
    # --no-binary for llama-cpp-python only: its build requirements may come as wheels (from
    # source, pip builds the whole build-requirement tree recursively, which takes many minutes)
    "$PY" -m pip download -q --no-deps --no-binary llama-cpp-python -d "$dl" "llama-cpp-python==$VERSION"
    tar -xzf "$dl"/llama_cpp_python-*.tar.gz -C "$dl"
    rm -rf "$SRC"
    mv "$dl"/llama_cpp_python-*/vendor/llama.cpp "$SRC"
    rm -rf "$dl"
fi

# BMI2 came with AVX2 on Intel (Haswell) and AMD (Excavator, Zen); turn it on only when this CPU
# reports it, so that the avx2 build always runs on the machine that built it.
has() { grep -qw "$1" /proc/cpuinfo 2>/dev/null && echo ON || echo OFF; }
bmi2=$(has bmi2)

for level in "${LEVELS[@]}"; do
    out=$BASE/$level
    case $level in
        native) isa=(-DGGML_NATIVE=ON) ;;
        avx2|avxvnni)
                avxvnni=OFF; [ "$level" = avxvnni ] && avxvnni=ON
                isa=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                     -DGGML_BMI2=$bmi2 -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF
                     -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=$avxvnni
                     -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
        avx512) isa=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                     -DGGML_BMI2=$bmi2 -DGGML_AVX512=ON -DGGML_AVX512_VBMI=$(has avx512vbmi)
                     -DGGML_AVX512_VNNI=$(has avx512_vnni) -DGGML_AVX512_BF16=$(has avx512_bf16)
                     -DGGML_AVX_VNNI=$(has avx_vnni)
                     -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
    esac
    cmake -S "$SRC" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF \
        "${isa[@]}" > "$out.cmake.log" 2>&1 || { cat "$out.cmake.log" >&2; exit 1; }
    cmake --build "$out" -j "$JOBS" --target llama-bench llama-quantize
    echo "$level: $out/bin/llama-bench $out/bin/llama-quantize"
done
