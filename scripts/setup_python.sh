#!/usr/bin/env bash
# Sets up the virtualenv the Python tests and benchmarks use and prints its path.
#
#   venv=$(scripts/setup_python.sh)      # then $venv/bin/python -m pytest tests/python
#
# The venv holds tests/python/requirements.lock (exact versions) and is cached
# under a path named by the SHA-256 of (lock file, Python version): it is built
# once per lock, reused by every later run, and never reused across a change of
# lock or interpreter (a new hash, a new folder; older ones are removed). The
# lock is what makes it safe to share: nothing in the venv depends on the
# checkout except the maskd package, which is reinstalled from client/python on
# every run (a few seconds). A folder left half-built (no .complete marker) is
# rebuilt. Concurrent runs serialise on a lock file.
#
# Environment: MASKD_PY_CACHE (default ~/.cache/maskd-python), PYTHON (default
# /usr/bin/python3 from Debian's python3 + python3-venv, see install-deps.sh).
# First build here: ~5.4 GB, ~4-5 min (torch from PyPI is a CUDA build and
# brings its nvidia-* libraries; see tests/python/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
CACHE=${MASKD_PY_CACHE:-$HOME/.cache/maskd-python}
LOCK=tests/python/requirements.lock
hash=$( { cat "$LOCK"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)
venv="$CACHE/venv-$hash"
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  for old in "$CACHE"/venv-*; do [ -e "$old" ] && rm -rf "$old"; done
  echo "setup_python: building $venv from $LOCK (first time for this lock)" >&2
  start=$(date +%s)
  "$PY" -m venv "$venv" >&2
  "$venv/bin/pip" install --no-cache-dir -q -r "$LOCK" >&2
  touch "$venv/.complete"
  echo "setup_python: built in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)" >&2
fi
# The package under test, from this checkout (not editable: tests see what a user installs).
"$venv/bin/pip" install -q --no-deps --force-reinstall --no-build-isolation ./client/python >&2
rm -rf client/python/build client/python/*.egg-info
echo "$venv"
