#!/usr/bin/env bash
# Builds the maskd llama.cpp sampler (client/llama_sampler): its library, the
# example maskd_llama_generate and the test program maskd_llama_sampler_test,
# into build-llama/ (a maskd configure of its own: tests, benchmarks and CUDA
# off; only these targets and what they need, the client and its proto).
#
#   tests/engines/llama.cpp/build_sampler.sh [VENV]
#
# The llama.cpp sources are vendor/llama.cpp of llama-cpp-python 0.3.36's sdist
# (pip download, unpacked into build-llama/src once). With VENV (a venv where
# tests/engines/llama.cpp/install.sh built llama-cpp-python from that sdist),
# the sampler links that venv's libllama.so (copied into build-llama/llama-lib,
# so that the binaries outlive the venv's cache folder) instead of building
# llama.cpp a second time; without it llama.cpp is built here, statically
# (a few minutes more). Jobs: $JOBS (default 2). Prints the build folder.
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv=${1:-}
out=${MASKD_LLAMA_BUILD_DIR:-$PWD/build-llama}
jobs=${JOBS:-2}
src=$out/src/llama_cpp_python-0.3.36
mkdir -p "$out/src"
if [ ! -f "$src/vendor/llama.cpp/include/llama.h" ]; then
  pip=${venv:+$venv/bin/pip}
  ${pip:-pip} download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$out/src" >&2
  tar -xzf "$out/src/llama_cpp_python-0.3.36.tar.gz" -C "$out/src"
fi
args=(-DMASKD_LLAMA_CPP_DIR="$src/vendor/llama.cpp")
if [ -n "$venv" ]; then
  lib=$("$venv/bin/python" -c 'import llama_cpp, os; print(os.path.join(os.path.dirname(llama_cpp.__file__), "lib"))')
  rm -rf "$out/llama-lib"
  mkdir -p "$out/llama-lib"
  cp -a "$lib"/lib*.so* "$out/llama-lib/"
  args+=(-DMASKD_LLAMA_CPP_LIB_DIR="$out/llama-lib")
else
  args+=(-DMASKD_LLAMA_CPP_LIB_DIR=)
fi
cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMASKD_BUILD_TESTS=OFF \
  -DMASKD_BUILD_BENCH=OFF -DMASKD_WITH_CUDA=OFF "${args[@]}" >&2
nice cmake --build "$out" -j "$jobs" --target maskd_llama_sampler_test maskd_llama_generate >&2
echo "$out"
