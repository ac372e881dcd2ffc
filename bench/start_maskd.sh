# Sourced by the service benchmarks: starts "$BUILD/bin/maskd" on a unix socket
# in a temporary folder whose tokenizer folder links to ../shared's llama3,
# passing its own arguments through, and stops it (and removes the folder) on
# exit. Needs ROOT and BUILD; sets WORK, SOCK and M (maskctl on that socket).
# Without ../shared it prints why and exits 0 (the caller is skipped).
LLAMA3=$ROOT/../shared/tokenizers/llama3
if [[ ! -d $LLAMA3 ]]; then
  echo "$(basename "$0"): $LLAMA3 not found (needs ../shared); skipping" >&2
  exit 0
fi
WORK=$(mktemp -d /tmp/maskd-bench-XXXXXX)
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/tokenizers"
ln -s "$(cd "$LLAMA3" && pwd)" "$WORK/tokenizers/llama3"
SOCK=unix://$WORK/maskd.sock
"$BUILD/bin/maskd" --listen "$SOCK" --metrics-listen 127.0.0.1:0 \
  --tokenizer-dir "$WORK/tokenizers" "$@" 2> "$WORK/maskd.log" &
PID=$!
for _ in $(seq 300); do grep -q ' INFO start ' "$WORK/maskd.log" 2>/dev/null && break; sleep 0.1; done
M="$BUILD/bin/maskctl --addr $SOCK"
