#!/usr/bin/env python3
"""The maskbench-dev schemas whose regex-route regex is over N bytes (or does
not convert), as one JSON-lines file for `maskctl maskbench`.

  python3 bench/maskbench_by_regex_size.py --min-bytes 262144 --out big.jsonl
      [--maskctl build/bin/maskctl] [--dir ../shared/corpora/maskbench-dev]

Each schema's size is `maskctl schema-to-regex`'s output (default options).
docs/json-schema.md ("Routes") ran `maskctl maskbench --fresh --cpu-time
--require-text --stages --route auto --auto-route-max-regex-bytes N` on the
file this writes with --min-bytes 262144 (827 schemas).
"""
import argparse
import glob
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def regex_bytes(maskctl, schema):
    """Bytes of the schema's regex; -1 when it does not convert."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        f.write(schema if isinstance(schema, str) else json.dumps(schema))
        f.flush()
        r = subprocess.run([maskctl, "schema-to-regex", f.name], capture_output=True)
    return len(r.stdout) if r.returncode == 0 else -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--maskctl", default=os.path.join(ROOT, "build/bin/maskctl"))
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(ROOT), "shared/corpora/maskbench-dev"))
    args = ap.parse_args()
    kept = 0
    with open(args.out, "w") as out:
        for path in sorted(glob.glob(os.path.join(args.dir, "*.jsonl"))):
            for line in open(path):
                size = regex_bytes(args.maskctl, json.loads(line)["schema"])
                if size < 0 or size > args.min_bytes:
                    out.write(line)
                    kept += 1
    print(f"{kept} schemas -> {args.out}")


if __name__ == "__main__":
    main()
