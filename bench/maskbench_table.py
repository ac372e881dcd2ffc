#!/usr/bin/env python3
"""MaskBench per file, warm and fresh, as one markdown table (docs/benchmarks.md).

Runs `maskctl maskbench --require-text` over every file of maskbench-dev twice
in one process each: warm (one long process: the tokenizer's loop memo stays
warm across schemas) and --fresh (the memo emptied before each schema: what a
schema pays in a new process). Verdicts must agree between the two runs.

  python3 bench/maskbench_table.py [--maskctl build/bin/maskctl]
      [--tokenizer ../shared/tokenizers/llama3] [--dir ../shared/corpora/maskbench-dev]
      [--markdown OUT.md] [--clock wall|cpu] [--files BFCL_simple,...] [--reasons OUT.txt]

--reasons: the warm run also gets --verbose, and its stderr (one line per
failure, then the top failure reasons) is written to OUT.txt
(bench/tables/maskbench_reasons.py formats it).

The fresh run also gets --stages, and a second table says where its time goes
on the regex route: TTFM split into the schema's conversion, the DFA and index,
and the first mask; TBM split into first visits (a state's mask computed) and
revisits.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")


def run(maskctl, tok, files, fresh, cpu, reasons=None):
    cmd = [maskctl, "maskbench", "--tokenizer", tok, "--require-text"] + (["--fresh", "--stages"] if fresh else [])
    cmd += (["--cpu-time"] if cpu else []) + (["--verbose"] if reasons else []) + files
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    if reasons:
        with open(reasons, "w") as fh:
            fh.write(p.stderr)
    return {os.path.basename(j["file"]).replace(".jsonl", ""): j
            for j in (json.loads(l) for l in p.stdout.splitlines() if l.startswith("{"))}


def goals(per_file, total):
    """The issue #14 and #26 goals over the fresh run: the whole set, and the files meeting each."""
    parts = []
    for key, limit, label, unit, scale in (("ttfm_p50_us", 2000, "TTFM p50 ≤ 2 ms", "ms", 1e3),
                                           ("ttfm_p99_us", 20000, "TTFM p99 ≤ 20 ms", "ms", 1e3),
                                           ("ttfm_max_us", 100000, "TTFM max ≤ 100 ms", "ms", 1e3),
                                           ("tbm_avg_us", 20, "TBM mean ≤ 20 µs", "µs", 1)):
        if key not in total:  # a maskctl from before ttfm_max_us
            continue
        met = sum(1 for f in per_file if f[key] <= limit)
        parts.append("%s: %s, %.2f %s (met on %d of %d files)" % (
            label, "met" if total[key] <= limit else "**missed**", total[key] / scale, unit, met, len(per_file)))
    return "Goals (fresh, all files): " + "; ".join(parts) + ". Verdicts equal in the warm and fresh runs."


def ms(us):
    return "%.2f" % (us / 1000.0)


def ms3(us):
    return "%.3f" % (us / 1000.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maskctl", default=os.path.join(ROOT, "build", "bin", "maskctl"))
    ap.add_argument("--tokenizer", default=os.path.join(SHARED, "tokenizers", "llama3"))
    ap.add_argument("--dir", default=os.path.join(SHARED, "corpora", "maskbench-dev"))
    ap.add_argument("--markdown")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    ap.add_argument("--files", default="", help="comma-separated file names (default: all)")
    ap.add_argument("--reasons", help="write the warm run's --verbose stderr here")
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.dir, "*.jsonl")))
    if args.files:
        files = [os.path.join(args.dir, f if f.endswith(".jsonl") else f + ".jsonl")
                 for f in args.files.split(",")]
    warm = run(args.maskctl, args.tokenizer, files, False, args.clock == "cpu", args.reasons)
    fresh = run(args.maskctl, args.tokenizer, files, True, args.clock == "cpu")
    lines = ["| file | schemas | compiled | passing | TTFM p50 ms fresh (warm) | TTFM p99 ms fresh (warm) "
             "| TBM avg µs fresh (warm) | TBM p50 µs fresh | TBM p99 µs fresh |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in [os.path.basename(f).replace(".jsonl", "") for f in files] + ["all"]:
        w, f = warm[name], fresh[name]
        for k in ("schemas", "compiled", "passing", "valid_accepted", "invalid_rejected"):
            if w[k] != f[k]:
                sys.exit("verdicts differ between warm and fresh runs: %s %s" % (name, k))
        lines.append("| %s | %d | %d | %d (%.1f%%) | %s (%s) | %s (%s) | %.1f (%.1f) | %.2f | %.1f |" % (
            "**all**" if name == "all" else name, f["schemas"], f["compiled"], f["passing"],
            100.0 * f["passing"] / max(1, f["schemas"]), ms(f["ttfm_p50_us"]), ms(w["ttfm_p50_us"]),
            ms(f["ttfm_p99_us"]), ms(w["ttfm_p99_us"]), f["tbm_avg_us"], w["tbm_avg_us"],
            f["tbm_p50_us"], f["tbm_p99_us"]))
    lines += ["", goals([fresh[os.path.basename(f).replace(".jsonl", "")] for f in files], fresh["all"])]
    lines += ["", "Where the fresh run's time goes (`--stages`; regex route, medians per schema and "
              "shares of the summed time):", "",
              "| file | convert p50 ms | DFA + index p50 ms | first mask p50 ms | TTFM share: convert / DFA + index / first mask "
              "| steps that are first visits | TBM share in first visits | µs per first visit | µs per revisit |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in [os.path.basename(f).replace(".jsonl", "") for f in files] + ["all"]:
        st = fresh[name].get("stages")
        if not st or not st["schemas"]:
            continue
        lines.append("| %s | %s | %s | %s | %d%% / %d%% / %d%% | %.0f%% | %d%% | %.1f | %.2f |" % (
            "**all**" if name == "all" else name, ms3(st["convert_p50_us"]), ms3(st["dfa_index_p50_us"]),
            ms3(st["first_mask_p50_us"]), round(100 * st["convert_share"]), round(100 * st["dfa_index_share"]),
            round(100 * st["first_mask_share"]), 100.0 * st["tbm_first_visits"] / max(1, st["tbm_steps"]),
            round(100 * st["tbm_first_visit_share"]), st["tbm_first_visit_avg_us"], st["tbm_revisit_avg_us"]))
    md = "\n".join(lines) + "\n"
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(md)
    sys.stdout.write(md)


if __name__ == "__main__":
    main()
