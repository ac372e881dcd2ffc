#!/usr/bin/env bash
# Sets up (once) the virtualenv of one inference engine and prints its path.
#
#   venv=$(scripts/engine_venv.sh vllm)     # vllm | sglang | llama.cpp | transformers | mlx-lm
#
# vllm, sglang and llama.cpp each get their own venv, populated by
# tests/engines/ENGINE/install.sh (exact versions) and cached under
# $MASKD_ENGINE_CACHE (default ~/.cache/maskd-engines) in a folder named by the SHA-256
# of (that script, the Python version): built once, reused by every later run, rebuilt
# when the script changes (older folders of that engine are removed). A folder left
# half-built (no .complete marker) is rebuilt; concurrent runs serialise on a lock.
# transformers and mlx-lm use the Python tests' venv (scripts/setup_python.sh).
# The maskd package is reinstalled from client/python on every call (a few seconds).
# Sizes and first-build times on this machine: docs/engines.md.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${1:?usage: scripts/engine_venv.sh vllm|sglang|llama.cpp|transformers|mlx-lm}
case "$engine" in
  transformers|mlx-lm) exec scripts/setup_python.sh ;;
  vllm|sglang|llama.cpp) ;;
  *) echo "engine_venv: unknown engine '$engine'" >&2; exit 2 ;;
esac
PY=${PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
CACHE=${MASKD_ENGINE_CACHE:-$HOME/.cache/maskd-engines}
INSTALL=tests/engines/$engine/install.sh
[ -f "$INSTALL" ] || { echo "engine_venv: $INSTALL is missing" >&2; exit 2; }
hash=$( { cat "$INSTALL"; "$PY" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)
venv="$CACHE/$engine-$hash"
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock-$engine"
flock 9
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  for old in "$CACHE/$engine"-*; do
    case "$old" in *-dev) ;; *) [ -e "$old" ] && rm -rf "$old" ;; esac
  done
  echo "engine_venv: building $venv with $INSTALL (first time for this script)" >&2
  start=$(date +%s)
  "$PY" -m venv "$venv" >&2
  "$venv/bin/pip" install -q --upgrade pip >&2
  bash "$INSTALL" "$venv" >&2
  touch "$venv/.complete"
  echo "engine_venv: built in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)" >&2
fi
"$venv/bin/pip" install -q --no-deps --force-reinstall --no-build-isolation ./client/python >&2
rm -rf client/python/build client/python/*.egg-info
echo "$venv"
