#!/usr/bin/env bash
# bench/soak/hostile_mix.sh MINUTES [maskd_hostile_mix flags...]
# Builds maskd and the hostile-mix driver (build/, Release) if needed, then
# runs it for MINUTES minutes at nice 5: maskd at its default flags, 4
# well-behaved clients stepping regex, JSON Schema and Lark sessions, and in
# every other 60 s phase hostile actors beside them (ambiguous grammars,
# session floods, abandoned compiles, compile floods), run by a second
# maskd_hostile_mix process as attackers would be (--hostile-in-process 1:
# as threads of the driver, the old way, to compare). Prints a summary block
# (paste it into docs/reliability.md, "Hostile mix"); exit 0 when every goal
# holds (good clients: 0 errors, hostile p99 <= 2x quiet p99; maskd's RSS and
# fds flat after the warm-up), 1 otherwise. The warm-up is one quiet and one
# hostile phase (120 s): the first hostile phase raises RSS to its working
# level once (sessions, gRPC and malloc arenas); flat means no growth after.
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes=${1:?usage: bench/soak/hostile_mix.sh MINUTES [maskd_hostile_mix flags...]}
shift
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
build=${MASKD_BUILD_DIR:-build}
if [[ ! -f $build/build.ninja && ! -f $build/Makefile ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMASKD_BUILD_BENCH=OFF
fi
cmake --build "$build" -j"${JOBS:-2}" --target maskd maskd_hostile_mix
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then commit+="-dirty"; fi
MASKD_COMMIT=$commit exec nice -n 5 "$build/bin/maskd_hostile_mix" --seconds "$seconds" \
  --phase-seconds 60 --warmup 120 --good-clients "${GOOD_CLIENTS:-4}" "$@"
