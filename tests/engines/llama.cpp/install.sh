#!/usr/bin/env bash
# Installs the llama.cpp engine's packages into an existing venv:
#
#   tests/engines/llama.cpp/install.sh VENV
#
# llama-cpp-python 0.3.36 is built from its sdist (CPU, CMake, two jobs at most:
# the build machines are shared); its vendor/llama.cpp is also what
# build_sampler.sh builds the C++ sampler against. gguf writes the tiny test
# model (bench/engines/tiny_gguf.py); jsonschema, regex and lark are the
# independent matchers of tests/engines/llama.cpp/test_llama_cpp.py; grpcio,
# grpcio-health-checking and protobuf are the maskd client's own dependencies
# (client/python/pyproject.toml);
# setuptools and wheel let scripts/engine_venv.sh install client/python without
# build isolation (Debian's venv setuptools 66 has no bdist_wheel without wheel).
# scripts/engine_venv.sh caches the venv keyed on this file's hash.
set -euo pipefail
venv=${1:?usage: install.sh VENV}
pip="$venv/bin/pip"
"$pip" install -q --upgrade pip
# LLAVA_BUILD=OFF: no multimodal library; the llama.cpp tests, examples, tools
# and server are not built (only libllama + ggml, and llama.cpp's common lib,
# which llama-cpp-python forces on). GGML_NATIVE stays on: the venv is built on
# the machine that uses it.
export CMAKE_ARGS="${CMAKE_ARGS:-} -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
nice "$pip" install -q --no-binary llama-cpp-python "llama-cpp-python==0.3.36"
"$pip" install -q gguf numpy jsonschema regex lark pytest \
  "grpcio>=1.85.1" "grpcio-health-checking>=1.85.1" "protobuf>=7.35.1" "setuptools>=68" wheel
