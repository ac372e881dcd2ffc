#!/usr/bin/env bash
# Configures and builds maskd in Release into build/ (or $MASKD_BUILD_DIR).
# Extra arguments are passed to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${MASKD_BUILD_DIR:-build}"
JOBS="${MASKD_JOBS:-$(nproc)}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$BUILD_DIR" -j "$JOBS"
