#!/usr/bin/env python3
"""Cost of budget mode per Step: one session in a wide state (inside a JSON string: nearly
every token allowed) stepped with no token (a repeated query) with and without
max_tokens_left, p50/p99 over N calls on one unix-socket channel.

    build/bin/maskd --listen unix:///tmp/maskd-bench.sock --metrics-listen= &
    $(scripts/setup_python.sh)/bin/python bench/python/bench_budget.py --addr unix:///tmp/maskd-bench.sock
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "client" / "python"))
import maskd  # noqa: E402

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                           "n": {"type": "integer"}},
          "required": ["name", "n"], "additionalProperties": False}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default="unix:///tmp/maskd.sock")
    ap.add_argument("-n", type=int, default=2000)
    a = ap.parse_args()
    c = maskd.Client(a.addr)
    ix = c.compile("qwen3", json_schema=SCHEMA).index_id
    s = c.create_session(ix).session_id
    prefix = '{"name": "'
    toks = []
    for ch in prefix:  # one single-byte token per character
        row = c.step([(s, toks)]).raise_for_status().masks[0]
        t = next(t for t in maskd.allowed_tokens(row) if c.detokenize("qwen3", [t]) == ch.encode())
        toks = [t]
    c.step([(s, toks)]).raise_for_status()
    out = {}
    for label, left in (("no budget", 0), ("budget, loose (no filtering)", 10_000), ("budget, tight", 20)):
        times = []
        for _ in range(a.n):
            t0 = time.perf_counter()
            r = c.step([(s, [], 0, left)]).raise_for_status()
            times.append(time.perf_counter() - t0)
        times.sort()
        allowed = len(maskd.allowed_tokens(r.masks[0]))
        out[label] = {"p50_us": 1e6 * times[len(times) // 2], "p99_us": 1e6 * times[int(0.99 * len(times))],
                      "allowed_tokens": allowed}
        print(json.dumps({"mode": label, **out[label]}), flush=True)
    c.close_session(s)


if __name__ == "__main__":
    main()
