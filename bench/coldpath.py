#!/usr/bin/env python3
"""What a fresh constraint costs, in a fresh process: maskd and its peers side by side.

For each (tokenizer, regex) of bench/data/cold_regexes.json, every engine runs
in its own new process (--repeats times; medians are reported, never minima):
  - maskd: build/bin/maskd_coldpath (bench/coldpath/coldpath_main.cc);
  - peers (optional, from a virtualenv, never in the default tests; see
    scripts/bench_venv.sh): llguidance, xgrammar and outlines-core, each fed
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
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
STUBS = os.path.join(ROOT, "bench", "peer_stubs")


# --------------------------------------------------------------------------
# Peer side: one engine, one case, in this (fresh) process.

def load_dump(maskctl, tok_dir, cache_dir):
    """(vocab_size, eos ids, {id: bytes}, special ids) exactly as maskd loads them."""
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, os.path.basename(tok_dir.rstrip("/")) + ".vocab.json")
    if not os.path.exists(path):
        info = json.loads(subprocess.check_output([maskctl, "vocab", "--tokenizer", tok_dir]))
        tokens, special = {}, []
        for line in subprocess.check_output(
                [maskctl, "vocab", "--tokenizer", tok_dir, "--dump"]).splitlines():
            d = json.loads(line)
            tokens[d["id"]] = d["hex"]
            if d["special"]:
                special.append(d["id"])
        with open(path + ".tmp", "w") as f:
            json.dump({"vocab_size": info["vocab_size"], "eos": info["eos"], "tokens": tokens,
                       "special": special}, f)
        os.replace(path + ".tmp", path)
    with open(path) as f:
        d = json.load(f)
    tokens = {int(k): bytes.fromhex(v) for k, v in d["tokens"].items()}
    return d["vocab_size"], d["eos"], tokens, set(d["special"])


# Each peer: compile(regex); mask_into(np.uint32 array); advance(token); reset().
class LLGuidancePeer:
    def __init__(self, vocab_size, eos, tokens, special):
        import llguidance
        import numpy as np
        self.ll = llguidance
        self.np = np

        by_bytes = {}
        for i in sorted(tokens):
            if i not in special and tokens[i]:
                by_bytes.setdefault(tokens[i], i)
        max_len = max(len(b) for b in by_bytes)

        class Wrapper:
            def __init__(self):
                self.eos_token_id = eos[0]
                self.bos_token_id = None
                # llguidance marks special tokens by id; holes are special too.
                self.tokens = [tokens.get(i, b"") if i not in special else b"\xff" + tokens.get(i, b"")
                               for i in range(vocab_size)]
                self.special_token_ids = sorted(set(special) | {i for i in range(vocab_size)
                                                                if i not in tokens})

            def __call__(self, s):
                # Greedy longest match over the same bytes. llguidance
                # tokenizes forced text with it, so it must be a real
                # tokenizer of this vocabulary (not BPE-exact: forced tokens
                # may then differ from the tokenizer's own).
                b = s.encode() if isinstance(s, str) else s
                out, i = [], 0
                while i < len(b):
                    for n in range(min(max_len, len(b) - i), 0, -1):
                        t = by_bytes.get(b[i:i + n])
                        if t is not None:
                            out.append(t)
                            i += n
                            break
                    else:
                        i += 1  # a byte no token spells: skipped
                return out

        self.tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(Wrapper()), n_vocab=vocab_size,
                                          eos_token=list(eos))

    def compile(self, regex):
        self.m = self.ll.LLMatcher(self.tok, self.ll.LLMatcher.grammar_from_regex(regex), log_level=0)
        if self.m.is_error():
            raise RuntimeError(self.m.get_error())

    def mask_into(self, arr):
        self.m.unsafe_compute_mask_ptr(arr.ctypes.data, arr.nbytes)

    def reset(self):
        self.m.reset()

    def advance(self, t):
        if not self.m.consume_token(t):
            raise RuntimeError("llguidance refused token %d: %s" % (t, self.m.get_error()))


class XGrammarPeer:
    def __init__(self, vocab_size, eos, tokens, special):
        sys.path.insert(0, STUBS)  # torch/transformers: imported, never used here
        import numpy as np
        import xgrammar as xgr
        self.xgr = xgr
        # Specials and holes as empty strings: xgrammar treats those as special.
        vocab = [b"" if (i in special or i not in tokens) else tokens[i] for i in range(vocab_size)]
        self.info = xgr.TokenizerInfo(vocab, vocab_type=xgr.VocabType.RAW, vocab_size=vocab_size,
                                      stop_token_ids=list(eos))
        self.np = np

    def compile(self, regex):
        c = self.xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.m = self.xgr.GrammarMatcher(c.compile_regex(regex))

    def mask_into(self, arr):
        self.m.fill_next_token_bitmask(arr.view(self.np.int32).reshape(1, -1))

    def reset(self):
        self.m.reset()

    def advance(self, t):
        if not self.m.accept_token(t):
            raise RuntimeError("xgrammar refused token %d" % t)


class OutlinesPeer:
    def __init__(self, vocab_size, eos, tokens, special):
        import outlines_core
        self.oc = outlines_core
        m = {}
        for i, b in tokens.items():
            if i in special or i in eos:
                continue
            m.setdefault(b, []).append(i)
        # outlines-core takes one EOS id.
        self.vocab = outlines_core.Vocabulary(eos[0], m)

    def compile(self, regex):
        self.g = self.oc.Guide(self.oc.Index(regex, self.vocab))

    def mask_into(self, arr):
        self.g.write_mask_into(arr.ctypes.data, arr.size, 4)

    def reset(self):
        self.g.reset()

    def advance(self, t):
        self.g.advance(t, return_tokens=False)


PEERS = {"llguidance": LLGuidancePeer, "xgrammar": XGrammarPeer, "outlines": OutlinesPeer}


def describe_diff(mine, theirs, tokens, limit=3):
    import numpy as np
    diff = np.bitwise_xor(mine, theirs)
    out = []
    for w in np.nonzero(diff)[0]:
        bits = int(diff[w])
        while bits and len(out) < limit:
            b = (bits & -bits).bit_length() - 1
            bits &= bits - 1
            t = int(w) * 32 + b
            who = "maskd" if (int(mine[w]) >> b) & 1 else "peer"
            out.append("%d %r only %s" % (t, tokens.get(t, b""), who))
    return out, int(sum(bin(int(x)).count("1") for x in diff))


def run_peer(args):
    import numpy as np
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    vocab_size, eos, tokens, special = load_dump(args.maskctl, args.tokenizer, args.cache)
    peer = PEERS[args.peer](vocab_size, eos, tokens, special)
    with open(args.case) as f:
        case = json.load(f)
    regex, walk = case["regex"], case["tokens"]
    nw = (vocab_size + 31) // 32
    arr = np.zeros(nw, dtype=np.uint32)
    out = {"engine": args.peer}
    t0 = clock()
    peer.compile(regex)
    out["compile_ms"] = (clock() - t0) * 1e3
    t1 = clock()
    peer.mask_into(arr)
    out["first_mask_ms"] = (clock() - t1) * 1e3
    out["ttfm_ms"] = (clock() - t0) * 1e3
    # The first walk (the first mask again, now as step 0, as maskd does).
    masks = []
    walk_s = 0.0
    for step in range(len(walk) + 1):
        arr[:] = 0
        s0 = clock()
        peer.mask_into(arr)
        walk_s += clock() - s0
        masks.append(arr.copy())
        if step == len(walk):
            break
        s0 = clock()
        peer.advance(walk[step])
        walk_s += clock() - s0
    out["walk_ms"] = walk_s * 1e3
    # Warm: replays of the same walk on a fresh matcher over the same compiled
    # constraint (llguidance and xgrammar keep their caches in it).
    per_step = []
    for _ in range(args.warm_reps if walk else 0):
        peer.reset()
        s0 = clock()
        for t in walk:
            peer.mask_into(arr)
            peer.advance(t)
        per_step.append((clock() - s0) * 1e6 / len(walk))
    out["warm_step_us"] = statistics.median(per_step) if per_step else 0.0
    # Agreement with maskd's masks (bits past the vocabulary ignored).
    mine = np.fromfile(case["masks"], dtype=np.uint32).reshape(-1, nw)
    agree, diffs = 0, []
    tail = vocab_size % 32
    for i, m in enumerate(masks[:len(mine)]):
        a, b = mine[i].copy(), m.copy()
        if tail:
            a[-1] &= (1 << tail) - 1
            b[-1] &= (1 << tail) - 1
        if np.array_equal(a, b):
            agree += 1
        elif len(diffs) < 2:
            ex, n = describe_diff(a, b, tokens)
            diffs.append({"step": i, "tokens_differing": n, "examples": ex})
    out["agree"] = agree
    out["compared"] = min(len(mine), len(masks))
    out["diffs"] = diffs
    print(json.dumps(out))


# --------------------------------------------------------------------------
# Driver side.

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
        json.dump({"regex": regex, "tokens": runs[0]["tokens"], "masks": masks}, f)
    for eng in args.engines:
        if eng == "maskd":
            continue
        pruns, err = [], None
        for _ in range(args.repeats):
            try:
                p = subprocess.run([sys.executable, __file__, "--peer", eng, "--tokenizer", tok_dir,
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
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--tokenizer", help=argparse.SUPPRESS)
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
    if args.peer:
        run_peer(args)
        return
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
