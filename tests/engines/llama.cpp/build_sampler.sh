#!/usr/bin/env bash
# Builds the maskd llama.cpp sampler (client/llama_sampler): its library, the
# example maskd_llama_generate and the test program maskd_llama_sampler_test,
# into build-llama/ (a maskd configure of its own: tests, benchmarks and CUDA
# off; only these targets and what they need, the client and its proto).
#
#   tests/engines/llama.cpp/build_sampler.sh [VENV]
#   tests/engines/llama.cpp/build_sampler.sh --server
#
# The llama.cpp sources are vendor/llama.cpp of llama-cpp-python 0.3.36's sdist
# (pip download, unpacked into build-llama/src). With VENV (a venv where
# tests/engines/llama.cpp/install.sh built llama-cpp-python from that sdist),
# the sampler links that venv's libllama.so (copied into build-llama/llama-lib,
# so that the binaries outlive the venv's cache folder) instead of building
# llama.cpp a second time; without it llama.cpp is built here, statically
# (a few minutes more). --server also builds llama.cpp's llama-server with
# maskd as its grammar sampler (client/llama_sampler/llama_server_hook.cc), so
# it builds llama.cpp here (no VENV). The sources always carry
# client/llama_sampler/llama_server.patch (a weak hook in common/sampling.cpp
# and the request's n_predict in the sampling params: without the hook's
# definition nothing changes; libllama itself is untouched).
# Jobs: $JOBS (default 2). Prints the build folder.
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv=${1:-}
server=OFF
if [ "$venv" = --server ]; then server=ON; venv=; fi
out=${MASKD_LLAMA_BUILD_DIR:-$PWD/build-llama}
jobs=${JOBS:-2}
src=$out/src/llama_cpp_python-0.3.36
mkdir -p "$out/src"
sdist=$out/src/llama_cpp_python-0.3.36.tar.gz
if [ ! -f "$sdist" ]; then
  pip=${venv:+$venv/bin/pip}
  ${pip:-pip} download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$out/src" >&2
fi
# The sources are unpacked again, then patched, whenever the patch changes.
patch_file=client/llama_sampler/llama_server.patch
stamp="$(sha256sum < "$patch_file")"
if [ "$(cat "$src/.maskd-patch" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$src"
  tar -xzf "$sdist" -C "$out/src"
  patch -d "$src/vendor/llama.cpp" -p1 -s < "$patch_file"
  echo "$stamp" > "$src/.maskd-patch"
fi
args=(-DMASKD_LLAMA_CPP_DIR="$src/vendor/llama.cpp" -DMASKD_LLAMA_SERVER=$server)
targets=(maskd_llama_sampler_test maskd_llama_generate)
[ $server = ON ] && targets+=(llama-server)
if [ -n "$venv" ]; then
  lib=$("$venv/bin/python" -c 'import llama_cpp, os; print(os.path.join(os.path.dirname(llama_cpp.__file__), "lib"))')
  rm -rf "$out/llama-lib"
  mkdir -p "$out/llama-lib"
  cp -a "$lib"/lib*.so* "$out/llama-lib/"
  args+=(-DMASKD_LLAMA_CPP_LIB_DIR="$out/llama-lib")
else
  args+=(-DMASKD_LLAMA_CPP_LIB_DIR=)
fi
if command -v ccache >/dev/null; then  # as scripts/build.sh: shares the maskd build's hits
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMASKD_BUILD_TESTS=OFF \
  -DMASKD_BUILD_BENCH=OFF -DMASKD_WITH_CUDA=OFF "${args[@]}" >&2
nice cmake --build "$out" -j "$jobs" --target "${targets[@]}" >&2
echo "$out"
