#!/usr/bin/env bash
# The engine integrations' tests (tests/engines), each in its engine's cached venv
# (scripts/engine_venv.sh; the first run of an engine installs it: GBs, minutes, see
# docs/engines.md), against build/bin/maskd (scripts/build.sh first).
#
#   scripts/test-engines.sh                    # every engine
#   scripts/test-engines.sh vllm llama.cpp     # some
#
# Per engine: its own tests (tests/engines/ENGINE: backend objects against stateless
# replay, generation through the real engine) and the engine_e2e.sh command's test
# (tests/engines/test_e2e_command.py). Fails on a failed test or an engine whose run
# collected no test.
set -euo pipefail
cd "$(dirname "$0")/.."
export MASKD_BIN=${MASKD_BIN:-$PWD/${MASKD_BUILD_DIR:-build}/bin/maskd}
[ -x "$MASKD_BIN" ] || { echo "test-engines: no maskd at $MASKD_BIN (scripts/build.sh)" >&2; exit 2; }
engines=("$@")
[ ${#engines[@]} -gt 0 ] || engines=(vllm sglang llama.cpp transformers mlx-lm)
failed=()
for e in "${engines[@]}"; do
  echo "== $e =="
  venv=$(scripts/engine_venv.sh "$e")
  tests=(tests/engines/test_e2e_command.py)
  [ -d "tests/engines/$e" ] && tests=("tests/engines/$e" "${tests[@]}")
  rc=0
  MASKD_E2E_ENGINE=$e "$venv/bin/python" -m pytest -p no:cacheprovider -q "${tests[@]}" || rc=$?
  [ "$rc" -eq 0 ] || failed+=("$e (pytest exit $rc)")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test-engines: failed: ${failed[*]}" >&2
  exit 1
fi
echo "test-engines: ${engines[*]}: passed"
