#!/usr/bin/env bash
# bench/soak/run.sh MINUTES [maskd_soak flags...]
# Builds maskd and the soak driver (build/, Release) if needed, then runs the
# soak and fault test for MINUTES minutes at nice 10: mixed load against the
# real maskd, SIGKILL + restart every MINUTES*60/6 s (at least 60 s), every
# mask checked against the core library, RSS and fds sampled every second.
# Prints a summary block (paste it into docs/reliability.md); exit 0 on PASS.
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes=${1:?usage: bench/soak/run.sh MINUTES [maskd_soak flags...]}
shift
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
kill_every=$(( seconds / 6 ))
(( kill_every < 60 )) && kill_every=60
build=${MASKD_BUILD_DIR:-build}
if [[ ! -f $build/build.ninja && ! -f $build/Makefile ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMASKD_BUILD_BENCH=OFF
fi
cmake --build "$build" -j"${JOBS:-2}" --target maskd maskd_soak
exec nice -n 10 "$build/bin/maskd_soak" --seconds "$seconds" --kill-every "$kill_every" \
  --warmup 30 --workers "${WORKERS:-4}" "$@"
