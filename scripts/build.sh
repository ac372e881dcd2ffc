#!/usr/bin/env bash
# Configures and builds maskd in Release into build/ (or $MASKD_BUILD_DIR).
# Extra arguments are passed to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${MASKD_BUILD_DIR:-build}"
JOBS="${MASKD_JOBS:-$(nproc)}"
# ccache (installed by install-deps.sh) makes rebuilds and a second checkout's
# build cheap; paths are hashed relative to the checkout so clones share hits.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@"
cmake --build "$BUILD_DIR" -j "$JOBS"
