#!/usr/bin/env bash
# Runs the Python tests (tests/python, pytest) against build/bin/maskd in the
# cached virtualenv of scripts/setup_python.sh. Every optional package must be
# there (MASKD_PY_STRICT=1: a missing one fails instead of skipping). Exits
# non-zero when a test fails and when pytest ran no test (its exit code 5).
#
#   scripts/python_test.sh [pytest args...]    e.g. -k transformers -x
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(scripts/setup_python.sh)
export MASKD_BIN=${MASKD_BIN:-$PWD/${MASKD_BUILD_DIR:-build}/bin/maskd}
export MASKD_PY_STRICT=1
rc=0
(cd tests/python && "$venv/bin/python" -m pytest -p no:cacheprovider -q "$@") || rc=$?
if [ "$rc" -eq 5 ]; then
  echo "python_test: pytest collected no test: failing" >&2
  exit 1
fi
exit "$rc"
