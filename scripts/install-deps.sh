#!/usr/bin/env bash
# Installs maskd's build and test dependencies from Debian 12 packages.
# Idempotent: only missing packages are installed. Run as root.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates python3 python3-venv
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libsimdjson-dev nlohmann-json3-dev
  zlib1g-dev libssl-dev libhwy-dev
  libgtest-dev libgmock-dev libbenchmark-dev libre2-dev
  python3-h2 openssl
  clang libclang-rt-14-dev  # libFuzzer + sanitizers for fuzz/ (scripts/fuzz.sh, CI)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
