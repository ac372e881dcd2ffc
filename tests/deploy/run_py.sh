#!/bin/sh
# run_py.sh VENV SCRIPT [ARGS]: runs a deploy test with the venv's python3 (scripts/deploy_deps.sh)
# when it exists, else python3 on PATH (then a test that needs PyYAML skips with a message).
venv=$1; shift
if [ -x "$venv/bin/python3" ]; then exec "$venv/bin/python3" "$@"; fi
exec python3 "$@"
