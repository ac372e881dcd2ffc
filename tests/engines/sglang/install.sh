#!/usr/bin/env bash
# Installs SGLang's grammar path (not its model runner) into an existing venv.
# Usage: tests/engines/sglang/install.sh VENV
#
# sglang is installed --no-deps: its full requirement list pulls CUDA kernels
# (sglang-kernel, flashinfer, deep-gemm, ...) that only its model runner needs and
# that cannot run on a CPU host. The list below is what SGLang's grammar path
# imports -- sglang.srt.constrained.* (backends, grammar manager),
# sampling.sampling_batch_info, managers.schedule_batch, the batch result processor,
# server_args, plugins, and managers.scheduler (whose process_batch_result the maskd
# plugin hooks: SGLang applies hooks by importing their targets) -- found by importing those in a venv holding sglang alone and
# adding each missing module until they all import. Versions: sglang 0.5.23's
# Requires-Dist pin where it has one, else what pip resolved on 2026-12-03. Then the
# maskd client's runtime deps and the tests' matchers. (The maskd package itself is
# installed by scripts/engine_venv.sh from this checkout.) The list is inline so that
# engine_venv.sh's hash of this script covers it.
set -euo pipefail
VENV=${1:?usage: install.sh VENV}
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
req=$(mktemp)
trap 'rm -f "$req"' EXIT
cat >"$req" <<'REQ'
torch==2.14.1
torchvision==0.29.2
xgrammar==0.2.7
apache-tvm-ffi==0.1.11
transformers==5.19.0
tokenizers==0.23.2
llguidance==1.9.1
interegular==0.3.3
numpy==2.4.6
pydantic==2.14.4
orjson==3.13.0
regex==2026.11.19
psutil==7.2.2
requests==2.34.2
packaging==26.4
msgspec==0.23.0
pyzmq==27.3.0
pybase64==1.5.1
pillow==13.0.0
starlette==1.10.0
ipython==9.18.1
aiohttp==3.14.5
openai==2.8.0
partial_json_parser==0.2.1.1.post7
dill==0.4.1
sentencepiece==0.2.1
compressed-tensors==0.18.0
gguf==0.19.0
setproctitle==1.3.8
einops==0.8.2
uvicorn==0.55.0
fastapi==0.165.0
grpcio==1.85.3
grpcio-health-checking==1.85.1
protobuf==7.36.2
jsonschema==4.26.0
lark==1.3.1
pytest==9.2.0
REQ
"${PIP[@]}" --no-deps sglang==0.5.23
"${PIP[@]}" -r "$req"
"$VENV/bin/python" -c 'import sglang.srt.constrained.xgrammar_backend, sglang.srt.sampling.sampling_batch_info, sglang.srt.constrained.grammar_manager'
