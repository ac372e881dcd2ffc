"""Fresh-process runs shared by the peer benchmarks (bench/grammar_peers.py,
bench/tools_bench.py): a maskd coldpath binary, or a peer through
bench/peers.py, run args.repeats times (a new process each), reduced to the
medians of their JSON figures. `args` carries repeats, timeout_s and, for
peers, maskctl, cache, warm_reps and clock."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

PEERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers.py")


def medians(runs: list[dict]) -> dict:
    """Per key of runs[0]: the median over runs of a number, or of each number
    of a flat dict of numbers; other values from runs[0]."""

    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    out = {}
    for k, v in runs[0].items():
        if number(v):
            out[k] = statistics.median(r[k] for r in runs)
        elif isinstance(v, dict) and v and all(number(x) for x in v.values()):
            out[k] = {kk: statistics.median(r[k][kk] for r in runs) for kk in v}
        else:
            out[k] = v
    return out


def run_maskd(args, cmd: list[str], masks: str) -> dict:
    """`cmd` (a maskd coldpath binary's command line), the first run also
    writing its masks to `masks`: the medians, or {"error": stderr's tail}."""
    runs = []
    for r in range(args.repeats):
        p = subprocess.run(cmd + (["--masks-out", masks] if r == 0 else []), capture_output=True,
                           text=True, timeout=args.timeout_s)
        if p.returncode != 0:
            return {"error": p.stderr.strip()[-300:]}
        runs.append(json.loads(p.stdout))
    return medians(runs)


def run_peer(args, eng: str, tok_dir: str, kind: str, constraint: str, tokens: list[int], masks: str,
             tmp: str, diff_steps: int, diff_examples: int) -> dict:
    """Peer `eng` compiling `constraint` (of `kind`), walked with maskd's
    `tokens` and compared with maskd's `masks` at every step: the medians,
    the first run's agreement (masks are the same in every run), or
    {"error": ...}."""
    case = os.path.join(tmp, "case.json")
    with open(case, "w") as f:
        json.dump({"kind": kind, "constraint": constraint, "tokens": tokens, "masks": masks}, f)
    runs = []
    for _ in range(args.repeats):
        try:
            p = subprocess.run([sys.executable, PEERS, "--peer", eng, "--tokenizer", tok_dir, "--case", case,
                                "--maskctl", args.maskctl, "--cache", args.cache,
                                "--warm-reps", str(args.warm_reps), "--clock", args.clock,
                                "--diff-steps", str(diff_steps), "--diff-examples", str(diff_examples)],
                               capture_output=True, text=True, timeout=args.timeout_s)
        except subprocess.TimeoutExpired:
            return {"error": "timeout (%d s)" % args.timeout_s}
        if p.returncode != 0:
            return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:300]}
        runs.append(json.loads(p.stdout))
    e = medians(runs)
    e["agree"], e["compared"], e["diffs"] = runs[0]["agree"], runs[0]["compared"], runs[0]["diffs"]
    if "refused" in runs[0]:
        e["refused"] = runs[0]["refused"]
    return e
