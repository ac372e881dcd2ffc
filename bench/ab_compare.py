#!/usr/bin/env python3
"""Two builds of maskd side by side: MaskBench verdicts and times, index_bench times.

For a change meant to keep behaviour (a restructuring), the verdicts must be
equal and the times no worse. Both builds run in the same session, their runs
interleaved file by file (the order alternating), so that a load that comes and
goes falls on both.

  python3 bench/ab_compare.py --before BEFORE/build/bin --after build/bin
      [--tokenizer ../shared/tokenizers/llama3] [--dir ../shared/corpora/maskbench-dev]
      [--files BFCL_simple,...] [--modes warm,fresh] [--clock cpu|wall] [--maskbench-repeats 1]
      [--index-filter REGEX] [--index-repeats 3] [--markdown OUT.md]

A "before" build: `git worktree add ../before COMMIT && cmake -S ../before -B
../before/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMASKD_WITH_CUDA=OFF &&
cmake --build ../before/build --target maskctl index_bench`.

Output: markdown. MaskBench: per file, the verdict counts of both builds (a
difference is marked) and, per mode, TTFM p50 and TBM mean (µs) before/after
with their ratio (medians over --maskbench-repeats runs). index_bench: per benchmark, the median over repeats of each
build's CPU time, the two builds' processes alternating benchmark by benchmark, and the ratio after/before
(below 1: the after build is faster).
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
VERDICTS = ("schemas", "compiled", "passing", "valid_accepted", "invalid_rejected")
DEFAULT_INDEX_FILTER = ("^(Memcpy|CompileFirstMask(ColdMemo|WarmMemo)|FirstVisitWriteMask|"
                        "WriteMaskReady|NextState|GuideAdvance)[A-Za-z]*/llama3")


def maskbench(bin_dir, tok, path, fresh, cpu):
    cmd = [os.path.join(bin_dir, "maskctl"), "maskbench", "--tokenizer", tok, "--require-text"]
    cmd += (["--fresh"] if fresh else []) + (["--cpu-time"] if cpu else []) + [path]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return next(r for r in rows if r["file"] == "all")


def index_bench(bin_dir, flt):
    cmd = [os.path.join(bin_dir, "index_bench"), "--benchmark_filter=" + flt,
           "--benchmark_format=json", "--benchmark_min_time=0.2"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return {b["name"]: b["cpu_time"] * {"ns": 1e-3, "us": 1.0, "ms": 1e3}[b["time_unit"]]
            for b in json.loads(p.stdout)["benchmarks"] if b.get("run_type") != "aggregate"}


def ratio(after, before):
    return "%.2f" % (after / before) if before > 0 else "—"


def maskbench_section(args, files):
    modes = [m for m in args.modes.split(",") if m]
    lines = ["| file | schemas | compiled | passing | valid accepted | invalid rejected | "
             + " | ".join("TTFM p50 µs %s (ratio) | TBM mean µs %s (ratio)" % (m, m) for m in modes) + " |",
             "| --- | ---: | ---: | ---: | ---: | ---: |" + " ---: | ---: |" * len(modes)]
    totals = {m: {"before": [], "after": []} for m in modes}
    differing = []
    for i, path in enumerate(files):
        name = os.path.basename(path).replace(".jsonl", "")
        got = {}
        for m in modes:
            runs = {"before": [], "after": []}
            for rep in range(args.maskbench_repeats):
                order = ("before", "after") if (i + rep) % 2 == 0 else ("after", "before")
                for side in order:
                    runs[side].append(maskbench(getattr(args, side), args.tokenizer, path,
                                                m == "fresh", args.clock == "cpu"))
            for side, rs in runs.items():
                if any(r[k] != rs[0][k] for r in rs for k in VERDICTS):
                    sys.exit("%s: the %s build's verdicts differ between repeats" % (name, side))
                got[(m, side)] = dict(rs[0], **{k: statistics.median(r[k] for r in rs)
                                                for k in ("ttfm_p50_us", "tbm_avg_us")})
            print("%s %s done" % (name, m), file=sys.stderr, flush=True)
        b, a = got[(modes[0], "before")], got[(modes[0], "after")]
        cells = []
        for k in VERDICTS:
            if b[k] == a[k]:
                cells.append("%d" % a[k])
            else:
                cells.append("**%d → %d**" % (b[k], a[k]))
                differing.append("%s %s %d → %d" % (name, k, b[k], a[k]))
        for m in modes:
            mb, ma = got[(m, "before")], got[(m, "after")]
            totals[m]["before"].append(mb)
            totals[m]["after"].append(ma)
            cells.append("%.0f / %.0f (%s)" % (mb["ttfm_p50_us"], ma["ttfm_p50_us"],
                                               ratio(ma["ttfm_p50_us"], mb["ttfm_p50_us"])))
            cells.append("%.1f / %.1f (%s)" % (mb["tbm_avg_us"], ma["tbm_avg_us"],
                                               ratio(ma["tbm_avg_us"], mb["tbm_avg_us"])))
        lines.append("| %s | %s |" % (name, " | ".join(cells)))
    summary = []
    for m in modes:
        # Per-file ratios, then their median: every file counts once, whatever its size.
        r_ttfm = [a["ttfm_p50_us"] / b["ttfm_p50_us"] for b, a in
                  zip(totals[m]["before"], totals[m]["after"]) if b["ttfm_p50_us"] > 0]
        r_tbm = [a["tbm_avg_us"] / b["tbm_avg_us"] for b, a in
                 zip(totals[m]["before"], totals[m]["after"]) if b["tbm_avg_us"] > 0]
        summary.append("%s: median per-file ratio after/before TTFM p50 %.2f, TBM mean %.2f" % (
            m, statistics.median(r_ttfm), statistics.median(r_tbm)))
    lines += ["", "Verdicts: " + ("equal on every file." if not differing else
                                  "differ: " + "; ".join(differing) + "."),
              " ".join(s + "." for s in summary)]
    return lines


def index_section(args):
    # One benchmark at a time, the two builds alternating: a load that comes
    # and goes during the run falls on both sides of each row.
    p = subprocess.run([os.path.join(args.after, "index_bench"), "--benchmark_list_tests",
                        "--benchmark_filter=" + args.index_filter], capture_output=True, text=True, check=True)
    names = [n for n in p.stdout.split() if n]
    lines = ["| benchmark | before µs | after µs | after / before |", "| --- | ---: | ---: | ---: |"]
    for i, n in enumerate(names):
        runs = {"before": [], "after": []}
        for rep in range(args.index_repeats):
            for side in (("before", "after") if (i + rep) % 2 == 0 else ("after", "before")):
                got = index_bench(getattr(args, side), "^" + re.escape(n) + "$")
                if n in got:
                    runs[side].append(got[n])
        if runs["before"] and runs["after"]:
            b, a = statistics.median(runs["before"]), statistics.median(runs["after"])
            lines.append("| %s | %.3g | %.3g | %s |" % (n, b, a, ratio(a, b)))
        print("%s done" % n, file=sys.stderr, flush=True)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the before build's bin/ folder")
    ap.add_argument("--after", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--tokenizer", default=os.path.join(SHARED, "tokenizers", "llama3"))
    ap.add_argument("--dir", default=os.path.join(SHARED, "corpora", "maskbench-dev"))
    ap.add_argument("--files", default="", help="comma-separated file names (default: all)")
    ap.add_argument("--modes", default="warm,fresh")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="cpu")
    ap.add_argument("--maskbench-repeats", type=int, default=1)
    ap.add_argument("--index-filter", default=DEFAULT_INDEX_FILTER)
    ap.add_argument("--index-repeats", type=int, default=3)
    ap.add_argument("--skip-maskbench", action="store_true")
    ap.add_argument("--skip-index", action="store_true")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.dir, "*.jsonl")))
    if args.files:
        files = [os.path.join(args.dir, f if f.endswith(".jsonl") else f + ".jsonl")
                 for f in args.files.split(",")]
    lines = []
    if not args.skip_maskbench:
        lines += ["MaskBench (`maskctl maskbench --require-text`, one process per file, build, mode and "
                  "repeat, %d repeats; times before / after):" % args.maskbench_repeats, ""] + maskbench_section(args, files) + [""]
    if not args.skip_index:
        lines += ["index_bench (CPU time, median of %d runs of each build, the builds alternating benchmark by benchmark):" % args.index_repeats,
                  ""] + index_section(args)
    md = "\n".join(lines) + "\n"
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(md)
    sys.stdout.write(md)


if __name__ == "__main__":
    main()
