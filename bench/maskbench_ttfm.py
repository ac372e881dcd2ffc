#!/usr/bin/env python3
"""MaskBench time to first mask of a fresh constraint, maskd beside its peers (issue #26, item 6).

  .venv-bench/bin/python bench/maskbench_ttfm.py [--peers llguidance[,xgrammar]] \\
      [--files NAME,...] [--largest 60]

maskd: `maskctl maskbench --fresh --cpu-time --route auto --slowest 100000` per file, each
schema compiled with fresh caches and its compile + first mask timed in CPU time. A peer:
`bench/maskbench_peers.py --peer P --time` per file, in one process (the tokenizer loaded before,
the peer's own caches kept, as a serving process keeps them), CPU time. Both on the tokenizer
bytes maskd loads (Llama 3) and the layout maskctl maskbench uses.

Prints a markdown table: per engine, schemas compiled and TTFM p50 / p99 / max (nearest rank)
over every schema it compiles, over the schemas every engine compiles, and over the `--largest`
schemas by JSON text (those every engine compiles). Per-schema lines go to --raw.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import peers  # noqa: E402
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
CORPUS = os.path.join(SHARED, "corpora", "maskbench-dev")
TOKENIZER = os.path.join(SHARED, "tokenizers", "llama3")


def schema_name(field: str) -> str:
    """`Kubernetes---kb_0.json` or `sample Kubernetes/kb_0.json` -> `kb_0`."""
    base = field.split("---")[-1].split("/")[-1]
    return base[:-5] if base.endswith(".json") else base


def maskd_ttfm(path: str, maskctl: str) -> dict[str, float]:
    out = subprocess.run(
        [maskctl, "maskbench", "--tokenizer", TOKENIZER, "--require-text", "--cpu-time", "--fresh",
         "--route", "auto", "--slowest", "100000", path],
        capture_output=True, text=True, check=True)
    ttfm = {}
    for line in out.stderr.splitlines():
        # slowest: 12.3 ms grammar FILE NAME
        if line.startswith("slowest:"):
            parts = line.split()
            ttfm[schema_name(parts[5])] = float(parts[1])
    return ttfm


def peer_ttfm(peer: str, path: str, python: str, alias: dict[str, str]) -> dict[str, float]:
    """Keyed by schema_name of the `file` field (maskbench_peers.py names a schema by its
    `description`; `alias` maps that name to this one)."""
    out = subprocess.run(
        [python, os.path.join(ROOT, "bench", "maskbench_peers.py"), "--peer", peer, "--file", path,
         "--time"], capture_output=True, text=True, check=True)
    ttfm = {}
    for line in out.stdout.splitlines():
        # "llguidance NAME: ttfm 1.23 ms"
        head, _, rest = line.partition(": ttfm ")
        if rest:
            name = head.split(" ", 1)[1]
            ttfm[alias.get(name, name)] = float(rest.split()[0])
    return ttfm


def percentiles(values: list[float]) -> str:
    """p50 / p99 / max (nearest rank, peers.summary)."""
    if not values:
        return "— / — / —"
    s = peers.summary(values)
    return "%.2f / %.1f / %.1f" % (s["p50"], s["p99"], s["max"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", default="llguidance")
    ap.add_argument("--files", help="comma-separated MaskBench file names; every file when omitted")
    ap.add_argument("--largest", type=int, default=60)
    ap.add_argument("--maskctl", default=os.path.join(ROOT, "build", "bin", "maskctl"))
    ap.add_argument("--raw", help="write per-schema TTFM (JSON) here")
    args = ap.parse_args()
    if not os.path.isdir(CORPUS):
        print("no MaskBench corpus at %s" % CORPUS, file=sys.stderr)
        return 2
    names = args.files.split(",") if args.files else sorted(
        f[:-6] for f in os.listdir(CORPUS) if f.endswith(".jsonl"))
    engines = ["maskd"] + [p for p in args.peers.split(",") if p]
    ttfm: dict[str, dict[str, float]] = {e: {} for e in engines}  # engine -> "file/name" -> ms
    size: dict[str, int] = {}
    for name in names:
        path = os.path.join(CORPUS, name + ".jsonl")
        alias: dict[str, str] = {}
        for line in open(path):
            d = json.loads(line)
            schema = d["schema"] if isinstance(d["schema"], str) else json.dumps(d["schema"])
            size["%s/%s" % (name, schema_name(d["file"]))] = len(schema)
            # maskbench_peers.py's name for the schema.
            alias[os.path.basename(d.get("description", "")).replace(".json", "")] = schema_name(d["file"])
        for e in engines:
            got = (maskd_ttfm(path, args.maskctl) if e == "maskd"
                   else peer_ttfm(e, path, sys.executable, alias))
            ttfm[e].update({"%s/%s" % (name, k): v for k, v in got.items()})
        print("%s: %s" % (name, ", ".join("%s %d" % (e, len(ttfm[e])) for e in engines)), file=sys.stderr)
    if args.raw:
        with open(args.raw, "w") as f:
            json.dump({"size": size, "ttfm_ms": ttfm}, f)
    both = set(size)
    for e in engines:
        both &= set(ttfm[e])
    largest = sorted(both, key=lambda k: -size[k])[:args.largest]
    print("| engine | compiled | TTFM p50 / p99 / max ms, every schema it compiles | "
          "the %d every engine compiles | their %d largest |" % (len(both), len(largest)))
    print("| --- | ---: | --- | --- | --- |")
    for e in engines:
        t = ttfm[e]
        print("| %s | %d of %d | %s | %s | %s |" % (
            e, len(t), len(size), percentiles(list(t.values())), percentiles([t[k] for k in both]),
            percentiles([t[k] for k in largest])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
