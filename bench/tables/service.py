#!/usr/bin/env python3
"""Service table (docs/benchmarks.md, "Service"), from the JSON lines of

  bench/service_bench.sh build > S.jsonl      # maskctl bench, llama3, regex [^\\n]*
  python3 bench/tables/service.py S.jsonl

Step latency per run against an empty RPC (Ping) on the same channel in the
same run, then the ratios the goals name and the server's RSS over the long run.
"""
from __future__ import annotations

import argparse
import sys

from common import grouped, load_json_lines, num, table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl", help="service_bench.sh stdout ('-': stdin)")
    args = ap.parse_args()
    runs = [r for r in load_json_lines(args.jsonl) if "step_p50_us" in r]
    if not runs:
        print("service.py: no maskctl bench line in the input (is ../shared there?)", file=sys.stderr)
        return 2
    rows = []
    p50: dict[tuple[int, str], float] = {}
    for r in runs:
        sessions, mode = r["sessions"], r.get("mode", "?")
        name = "%d session%s × %s steps, %s" % (sessions, "" if sessions == 1 else "s", grouped(r["steps"]), mode)
        p50.setdefault((sessions, mode), r["step_p50_us"])
        ratio = "%.2f×" % (r["step_p50_us"] / r["ping_p50_us"]) if r["ping_p50_us"] > 0 else "—"
        rows.append([name, num(r["step_p50_us"], 1), num(r["step_p99_us"], 1), grouped(r["steps_per_s"]),
                     num(r["ping_p50_us"], 1), ratio])
    out = [table(["run", "step p50 µs", "step p99 µs", "steps/s", "ping p50 µs", "step p50 / ping p50"],
                 [False] + [True] * 5, rows)]
    notes = []
    for mode in ("unary", "stream"):
        if (1, mode) in p50 and (64, mode) in p50:
            notes.append("64 sessions / 1 session, step p50, %s: %.1f×" % (mode, p50[(64, mode)] / p50[(1, mode)]))
    for k in (1, 64):
        if (k, "unary") in p50 and (k, "stream") in p50:
            notes.append("stream / unary at %d session%s: %.2f×"
                         % (k, "" if k == 1 else "s", p50[(k, "stream")] / p50[(k, "unary")]))
    for r in runs:
        if "server_rss_bytes" in r:
            notes.append("server RSS (`Stats` RPC), %d sessions × %s steps: %s bytes at 10%% of the run, "
                         "%s at 100%%" % (r["sessions"], grouped(r["steps"]), grouped(r["server_rss_10pct_bytes"]),
                                          grouped(r["server_rss_bytes"])))
    out.append("\n".join("- " + n for n in notes) + "\n")
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
