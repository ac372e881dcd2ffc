#!/usr/bin/env python3
"""What a fresh constraint costs, in a fresh process: maskd and its peers side by side.

For each (tokenizer, regex) of bench/data/cold_regexes.json, every engine runs
in its own new process (--repeats times; medians are reported, never minima):
  - maskd: build/bin/maskd_coldpath (bench/coldpath/coldpath_main.cc);
  - peers (optional, from a virtualenv, never in the default tests; see
    scripts/bench_venv.sh), each run by bench/peers.py: llguidance, xgrammar
    and outlines-core, each fed
    the exact token bytes maskd loads (`maskctl vocab --dump`), walked with the
    very tokens maskd's seeded walk chose, and their mask compared with
    maskd's on every step.
Figures per engine (ms unless _us):
  ttfm      regex -> first mask (compile + first mask; tokenizer load excluded)
  walk      the whole first walk of the seeded sample (N steps: mask +
            advance each, every first visit included)
  warm_us   per step (mask + advance) when the same walk is replayed
  eager     (--eager) every reachable state's mask: maskd Precompute (one
            thread with --clock cpu, else --threads, wall); xgrammar's full
            compile (compile_regex).
            llguidance is lazy (no eager build); outlines-core's index is
            always full, so its ttfm is its eager build.
  agree     steps whose masks equal maskd's, of the steps compared

Usage:
  scripts/bench_venv.sh              # once: .venv-bench with the peers
  .venv-bench/bin/python bench/coldpath.py [--tokenizers llama3,qwen3,gemma3]
      [--regexes email,not_Z,...] [--engines maskd,llguidance,xgrammar,outlines]
      [--steps 30] [--seed 1] [--repeats 3] [--eager] [--threads 2]
      [--clock wall|cpu] [--json OUT.json] [--markdown OUT.md] [--render STDERR.log]
Peers' Python call overhead (about 0.1-0.3 us per call) is inside their figures.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
PEERS = os.path.join(ROOT, "bench", "peers.py")  # one peer, one case, per process


def median_of(runs, key):
    vals = [r[key] for r in runs if key in r]
    return statistics.median(vals) if vals else None


def run_case(args, tok, name, regex, tmp):
    tok_dir = os.path.join(args.tokenizer_root, tok)
    res = {"tokenizer": tok, "regex": name, "engines": {}}
    base = [args.coldpath, "--tokenizer", tok_dir, "--regex", regex, "--steps", str(args.steps),
            "--seed", str(args.seed), "--clock", args.clock]
    masks = os.path.join(tmp, "masks.bin")
    runs = []
    for r in range(args.repeats):
        cmd = base + (["--masks-out", masks] if r == 0 else [])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s)
        if p.returncode != 0:
            res["engines"]["maskd"] = {"error": p.stderr.strip()[:200]}
            return res
        runs.append(json.loads(p.stdout))
    m = {k: median_of(runs, k) for k in ("compile_ms", "first_mask_ms", "ttfm_ms", "walk_ms",
                                         "warm_step_us", "write_ns", "memcpy_ns", "advance_ns")}
    m["walk_steps"] = runs[0]["walk_steps"]
    m["dfa_states"] = runs[0]["dfa_states"]
    if args.eager:
        eruns = []
        for _ in range(args.repeats):
            # CPU time counts every thread's work: with --clock cpu the
            # build runs on one thread (its CPU time is then its latency).
            threads = 1 if args.clock == "cpu" else args.threads
            p = subprocess.run([args.coldpath, "--tokenizer", tok_dir, "--regex", regex, "--eager",
                                "--threads", str(threads), "--clock", args.clock],
                               capture_output=True, text=True, timeout=args.timeout_s)
            if p.returncode == 0:
                eruns.append(json.loads(p.stdout))
        m["eager_ms"] = median_of(eruns, "eager_ms")
        m["eager_states"] = eruns[0]["eager_states"] if eruns else None
    res["engines"]["maskd"] = m
    case = os.path.join(tmp, "case.json")
    with open(case, "w") as f:
        json.dump({"kind": "regex", "constraint": regex, "tokens": runs[0]["tokens"], "masks": masks}, f)
    for eng in args.engines:
        if eng == "maskd":
            continue
        pruns, err = [], None
        for _ in range(args.repeats):
            try:
                p = subprocess.run([sys.executable, PEERS, "--peer", eng, "--tokenizer", tok_dir,
                                    "--case", case, "--maskctl", args.maskctl, "--cache", args.cache,
                                    "--warm-reps", str(args.warm_reps), "--clock", args.clock],
                                   capture_output=True, text=True, timeout=args.timeout_s)
            except subprocess.TimeoutExpired:
                err = "timeout (%d s)" % args.timeout_s
                break
            if p.returncode != 0:
                err = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:200]
                break
            pruns.append(json.loads(p.stdout))
        if not pruns:
            res["engines"][eng] = {"error": err}
            continue
        e = {k: median_of(pruns, k) for k in ("compile_ms", "first_mask_ms", "ttfm_ms", "walk_ms",
                                              "warm_step_us")}
        e["agree"], e["compared"], e["diffs"] = pruns[0]["agree"], pruns[0]["compared"], pruns[0]["diffs"]
        res["engines"][eng] = e
    return res


def fmt(v, digits=2):
    if v is None:
        return "—"
    return ("%.*f" % (digits, v)) if v < 100 else "%.0f" % v


def markdown(results, engines, eager):
    peers = [e for e in engines if e != "maskd"]
    out = []

    def table(title, head, rows):
        out.append("**%s**" % title)
        out.append("")
        out.append("| " + " | ".join(head) + " |")
        out.append("| --- | --- |" + " ---: |" * (len(head) - 2))
        out.extend("| " + " | ".join(r) + " |" for r in rows)
        out.append("")

    def cell(r, eng, key, digits=2):
        e = r["engines"].get(eng, {})
        if "error" in e:
            return "err"
        return fmt(e.get(key), digits)

    def best(r, key, names):
        vals = [(r["engines"].get(n, {}).get(key), n) for n in names]
        vals = [(v, n) for v, n in vals if v is not None]
        return min(vals)[1] if vals else None

    ok = [r for r in results if "error" not in r["engines"].get("maskd", {})]
    for title, key in (("Regex → first mask, ms (compile + first mask)", "ttfm_ms"),
                       ("Whole first walk of the seeded sample, ms (every first visit)", "walk_ms"),
                       ("Warm step (mask + advance), µs", "warm_step_us")):
        rows = []
        for r in ok:
            row = [r["tokenizer"], r["regex"]] + [cell(r, e, key) for e in ["maskd"] + peers]
            if key == "walk_ms":
                row.append(str(r["engines"]["maskd"].get("walk_steps")))
                row.append(" · ".join(
                    "err" if "error" in r["engines"].get(p, {}) else "%s/%s" % (
                        r["engines"].get(p, {}).get("agree"), r["engines"].get(p, {}).get("compared"))
                    for p in peers) or "—")
            if key == "ttfm_ms" and peers:
                m = r["engines"]["maskd"].get(key)
                ll = r["engines"].get("llguidance", {}).get(key)
                row.append("%.2f×" % (m / ll) if m is not None and ll else "—")
            rows.append(row)
        head = ["tokenizer", "regex"] + ["maskd"] + peers
        if key == "walk_ms":
            head += ["steps", "masks agree (%s)" % "/".join(peers) if peers else "agree"]
        if key == "ttfm_ms" and peers:
            head += ["maskd / llguidance"]
        table(title, head, rows)
    table("maskd's warm parts over the walk's states, ns (WriteMask; a memcpy of as many bytes, same loop; one token advanced)",
          ["tokenizer", "regex", "WriteMask", "memcpy", "ratio", "advance"],
          [[r["tokenizer"], r["regex"], fmt(r["engines"]["maskd"].get("write_ns"), 0),
            fmt(r["engines"]["maskd"].get("memcpy_ns"), 0),
            ("%.2f" % (r["engines"]["maskd"]["write_ns"] / r["engines"]["maskd"]["memcpy_ns"])
             if r["engines"]["maskd"].get("memcpy_ns") else "—"),
            fmt(r["engines"]["maskd"].get("advance_ns"), 1)] for r in ok])
    if eager:
        table("Eager build of every reachable state, ms (maskd: Precompute, on one thread with --clock cpu, else on --threads threads, wall; xgrammar: its full compile, one thread; outlines-core: its index, always full)",
              ["tokenizer", "regex", "maskd eager", "states", "xgrammar compile", "outlines-core index", "maskd / xgrammar"],
              [[r["tokenizer"], r["regex"], fmt(r["engines"]["maskd"].get("eager_ms")),
                str(r["engines"]["maskd"].get("eager_states")), cell(r, "xgrammar", "compile_ms"),
                cell(r, "outlines", "compile_ms"),
                ("%.1f×" % (r["engines"]["maskd"]["eager_ms"] / r["engines"]["xgrammar"]["compile_ms"])
                 if r["engines"]["maskd"].get("eager_ms") and r["engines"].get("xgrammar", {}).get("compile_ms")
                 else "—")] for r in ok])
    notes = []
    for r in results:
        for p, pe in r["engines"].items():
            if pe.get("error"):
                notes.append("- %s / %s / %s: %s" % (r["tokenizer"], r["regex"], p, pe["error"]))
            for d in pe.get("diffs", []) or []:
                notes.append("- %s / %s / %s, step %d: %d tokens differ, e.g. %s" % (
                    r["tokenizer"], r["regex"], p, d["step"], d["tokens_differing"],
                    "; ".join(d["examples"])))
    if notes:
        out.append("Mask differences (first two steps per case) and errors:")
        out.append("")
        out.extend(notes)
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", default="llama3,qwen3,gemma3")
    ap.add_argument("--tokenizer-root", default=os.path.join(SHARED, "tokenizers"))
    ap.add_argument("--regex-file", default=os.path.join(ROOT, "bench", "data", "cold_regexes.json"))
    ap.add_argument("--regexes", default="", help="comma-separated names (default: all)")
    ap.add_argument("--engines", default="maskd,llguidance,xgrammar,outlines")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warm-reps", type=int, default=10)
    ap.add_argument("--eager", action="store_true")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: each process's CPU time (all threads), which a loaded machine "
                         "distorts less; eager builds are always wall time")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout-s", type=int, default=120)
    ap.add_argument("--coldpath", default=os.path.join(ROOT, "build", "bin", "maskd_coldpath"))
    ap.add_argument("--maskctl", default=os.path.join(ROOT, "build", "bin", "maskctl"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "coldpath-cache"))
    ap.add_argument("--render", help="render the markdown of a run's stderr (one JSON line per "
                                     "case; a partial run too) instead of running")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            results = [json.loads(l) for l in f if l.startswith("{")]
        sys.stdout.write(markdown(results, [e for e in args.engines.split(",") if e], args.eager))
        return
    with open(args.regex_file) as f:
        regexes = json.load(f)["regexes"]
    names = [n for n in args.regexes.split(",") if n] or list(regexes)
    args.engines = [e for e in args.engines.split(",") if e]
    results = []
    with tempfile.TemporaryDirectory(prefix="coldpath") as tmp:
        for tok in [t for t in args.tokenizers.split(",") if t]:
            for name in names:
                r = run_case(args, tok, name, regexes[name], tmp)
                results.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)
    md = markdown(results, args.engines, args.eager)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md)
    sys.stdout.write(md)


if __name__ == "__main__":
    main()
