#!/usr/bin/env python3
"""maskd's index against outlines-core's, side by side in one run.

For each tokenizer (llama3, qwen3, gemma3 from ../shared/tokenizers) and each
regex of ../shared/corpora/bench-regexes.json:
  - outlines-core: `Index(regex, Vocabulary(eos, {bytes: [ids]}))`, built from
    the very token bytes maskd loads (`maskctl vocab --dump`); its index is
    always fully built. Time (best of N) and memory (RSS growth of a forked
    child that builds one index: outlines-core exposes no size).
  - maskd: `maskctl compile --eager`: compile to first mask, and to every state
    reachable through tokens ready; index_bytes is maskd's own accounting
    (TokenIndex::MemoryBytes: DFA + per-state pointers + distinct masks).

Usage (outlines-core in a virtualenv, never in the default tests):
  python3 -m venv .venv-bench && .venv-bench/bin/pip install outlines-core
  .venv-bench/bin/python scripts/bench_vs_outlines.py [--maskctl build/bin/maskctl]
"""
import argparse
import json
import os
import subprocess
import sys
import time

from outlines_core import Index, Vocabulary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def load_vocab(maskctl, tok_dir):
    info = json.loads(subprocess.check_output([maskctl, "vocab", "--tokenizer", tok_dir]))
    tokens = {}
    for line in subprocess.check_output([maskctl, "vocab", "--tokenizer", tok_dir, "--dump"]).splitlines():
        d = json.loads(line)
        if d["special"] or d["id"] in info["eos"]:
            continue
        tokens.setdefault(bytes.fromhex(d["hex"]), []).append(d["id"])
    return info, tokens


def outlines_build(regex, vocab, repeats):
    best = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        Index(regex, vocab)
        dt = (time.perf_counter() - t0) * 1000
        best = dt if best is None else min(best, dt)
        if dt > 5000:
            break
    # Memory: RSS growth of a forked child building one index.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        before = rss_bytes()
        ix = Index(regex, vocab)
        after = rss_bytes()
        os.write(w, str(after - before).encode())
        os._exit(0)
    os.close(w)
    mem = int(os.read(r, 64) or b"0")
    os.waitpid(pid, 0)
    return best, mem


def maskd_compile(maskctl, tok_dir, regex, repeats):
    best = {}
    for _ in range(repeats):
        out = json.loads(subprocess.check_output(
            [maskctl, "compile", "--tokenizer", tok_dir, "--regex", regex, "--eager"]))
        for k in ("first_mask_ms", "ready_ms"):
            best[k] = min(best.get(k, 1e18), out[k])
        best["index_bytes"] = out["index_bytes"]
        best["dfa_states"] = out["dfa_states"]
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--maskctl", default=os.path.join(ROOT, "build", "bin", "maskctl"))
    ap.add_argument("--tokenizers", default="llama3,qwen3,gemma3")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    regexes = json.load(open(os.path.join(SHARED, "corpora", "bench-regexes.json")))["regexes"]
    print("| tokenizer | regex | outlines-core Index ms | maskd first mask ms | maskd ready ms "
          "| speedup first / ready | outlines-core RSS growth | maskd index bytes |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for tok in args.tokenizers.split(","):
        tok_dir = os.path.join(SHARED, "tokenizers", tok)
        info, tokens = load_vocab(args.maskctl, tok_dir)
        vocab = Vocabulary(info["eos"][0], tokens)
        for name, regex in regexes.items():
            o_ms, o_mem = outlines_build(regex, vocab, args.repeats)
            m = maskd_compile(args.maskctl, tok_dir, regex, args.repeats)
            print(f"| {tok} | {name} | {o_ms:.1f} | {m['first_mask_ms']:.3f} | {m['ready_ms']:.3f} "
                  f"| {o_ms / m['first_mask_ms']:.0f}x / {o_ms / m['ready_ms']:.0f}x "
                  f"| {o_mem / 1024:.0f} KiB | {m['index_bytes'] / 1024:.0f} KiB |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
