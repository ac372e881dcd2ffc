#!/usr/bin/env bash
# Creates .venv-bench with the peers bench/coldpath.py and bench/grammar_peers.py compare maskd with
# (PyPI, pinned). Never used by the default tests. xgrammar is installed
# without its torch/transformers/triton dependencies: it imports them only at
# import time, and bench/peer_stubs stands in for them (PyPI's torch wheel does
# not import here without CUDA libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-bench
.venv-bench/bin/pip install -q outlines-core==0.2.14 llguidance==1.9.1 numpy pydantic \
  "apache-tvm-ffi>=0.1.11" typing-extensions
.venv-bench/bin/pip install -q --no-deps xgrammar==0.2.9
.venv-bench/bin/python -c "import llguidance, outlines_core" 
PYTHONPATH=bench/peer_stubs .venv-bench/bin/python -c "import xgrammar"
echo ".venv-bench ready"
