#!/usr/bin/env bash
# One command from a fresh Debian 12 machine (as root) to a serving maskd:
# installs what is missing, builds in Release, and starts the server with the
# bundled Qwen3 tokenizer. Extra arguments are passed to maskd.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
SOCK=/tmp/maskd.sock  # maskd's default listen addresses: unix:///tmp/maskd.sock and 127.0.0.1:50051
cat <<MSG

maskd is starting with the bundled tokenizer "qwen3" (data/tokenizers/qwen3).
Talk to it from another terminal:
  build/bin/maskctl --addr unix://$SOCK health
  build/bin/maskctl --addr unix://$SOCK compile --tokenizer qwen3 --regex '[0-9]{3}-[0-9]{4}'
  build/bin/maskctl --addr unix://$SOCK generate --tokenizer qwen3 --regex '(cat|dog)s?' --seed 1 --max-tokens 8
Metrics: curl http://127.0.0.1:9464/metrics     Stop: Ctrl-C (drains in-flight RPCs).

MSG
exec build/bin/maskd "$@"
