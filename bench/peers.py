#!/usr/bin/env python3
"""maskd's peers, one engine and one case per (fresh) process, for the drivers
that compare them with maskd: bench/coldpath.py (regexes) and
bench/grammar_peers.py (grammars).

Run by a driver, never by hand:

  .venv-bench/bin/python bench/peers.py --peer llguidance|xgrammar|outlines \\
      --tokenizer DIR --case CASE.json --maskctl build/bin/maskctl --cache DIR \\
      [--warm-reps 10] [--clock wall|cpu] [--diff-steps 2] [--diff-examples 3]

CASE.json: {"kind": "regex"|"lark"|"gbnf"|"ebnf"|"structural_tag", "constraint": TEXT,
"tokens": [ids maskd's walk advanced], "masks": PATH of maskd's masks (the
mask dump format of bench/coldpath/coldpath_util.h: step 0 .. len(tokens))}.

Every peer is fed the exact token bytes maskd loads (`maskctl vocab --dump`),
walked with the tokens maskd's walk chose, and its mask compared with maskd's
at every step (bits past the vocabulary ignored). Prints one JSON line (ms
unless _us; the clock of --clock: wall, or this process's CPU time):
  compile_ms, first_mask_ms, ttfm_ms   constraint -> matcher; its first mask
  walk_ms          the whole first walk (mask + advance per step, the mask
                   after the last token included)
  step_us          per step of the first walk (mask + advance): mean, p50,
                   p99, max (nearest rank)
  warm_step_us     per step of the walk replayed on a reset matcher (median
                   of --warm-reps replays), and warm_us: mean, p50, p99, max
                   over every replayed step
  agree, compared  steps whose mask equals maskd's, of the steps compared
  refused          (only when it happened) the step, id and bytes of a token of
                   maskd's walk the peer refused; the walk stopped there
  diffs            the first --diff-steps differing steps: how many tokens
                   differ (only_maskd, only_peer: allowed by one side only),
                   the first --diff-examples of them with their bytes, and
                   the walk's text before the step
Peers' Python call overhead (about 0.1-0.3 us per call) is inside their figures.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUBS = os.path.join(ROOT, "bench", "peer_stubs")


def load_dump(maskctl: str, tok_dir: str, cache_dir: str):
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


# Each peer: compile(kind, text); mask_into(np.uint32 array); advance(token); reset().


def struct_tags(text: str):
    """A maskd structural tag document (schema tags only) as (trigger, begin,
    schema, end) per tag; each tag's trigger is the first of the document's
    that its begin starts with."""
    doc = json.loads(text)
    triggers = doc.get("triggers") or [t["begin"] for t in doc["tags"]]
    out = []
    for t in doc["tags"]:
        trig = next(x for x in triggers if t["begin"].startswith(x))
        out.append((trig, t["begin"], t["schema"], t.get("end", "")))
    return out, triggers


class LLGuidancePeer:
    def __init__(self, vocab_size, eos, tokens, special):
        import llguidance
        self.ll = llguidance

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

    def compile(self, kind: str, text: str) -> None:
        if kind == "regex":
            g = self.ll.LLMatcher.grammar_from_regex(text)
        elif kind == "lark":
            g = self.ll.LLMatcher.grammar_from_lark(text)
        elif kind == "structural_tag":  # llguidance's own StructTag: lazy trigger lexemes
            tags, _ = struct_tags(text)
            lark = self.ll.StructTag.to_grammar(
                [self.ll.StructTag(trigger=tr, begin=b, grammar=s, end=e) for tr, b, s, e in tags],
                assume_special=False)
            g = self.ll.LLMatcher.grammar_from_lark(lark)
        else:  # gbnf/ebnf: llguidance's own converter to its Lark
            g = self.ll.grammar_from("gbnf", text)
        self.m = self.ll.LLMatcher(self.tok, g, log_level=0)
        if self.m.is_error():
            raise RuntimeError(self.m.get_error())

    def mask_into(self, arr) -> None:
        self.m.unsafe_compute_mask_ptr(arr.ctypes.data, arr.nbytes)

    def reset(self) -> None:
        self.m.reset()

    def advance(self, t: int) -> None:
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

    def compile(self, kind: str, text: str) -> None:
        c = self.xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        if kind == "regex":
            g = c.compile_regex(text)
        elif kind in ("gbnf", "ebnf"):
            g = c.compile_grammar(text)
        elif kind == "structural_tag":  # the legacy (tags, triggers) form
            tags, triggers = struct_tags(text)
            items = [self.xgr.StructuralTagItem(begin=b, schema=json.dumps(s), end=e)
                     for _, b, s, e in tags]
            g = c.compile_structural_tag(items, triggers)
        else:
            raise RuntimeError("xgrammar takes no %s grammar" % kind)
        self.m = self.xgr.GrammarMatcher(g)

    def mask_into(self, arr) -> None:
        self.m.fill_next_token_bitmask(arr.view(self.np.int32).reshape(1, -1))

    def reset(self) -> None:
        self.m.reset()

    def advance(self, t: int) -> None:
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

    def compile(self, kind: str, text: str) -> None:
        if kind != "regex":
            raise RuntimeError("outlines-core takes regexes only")
        self.g = self.oc.Guide(self.oc.Index(text, self.vocab))

    def mask_into(self, arr) -> None:
        self.g.write_mask_into(arr.ctypes.data, arr.size, 4)

    def reset(self) -> None:
        self.g.reset()

    def advance(self, t: int) -> None:
        self.g.advance(t, return_tokens=False)


PEERS = {"llguidance": LLGuidancePeer, "xgrammar": XGrammarPeer, "outlines": OutlinesPeer}


def popcount(words) -> int:
    return int(sum(bin(int(x)).count("1") for x in words))


def describe_diff(mine, theirs, tokens, limit=3):
    """(up to `limit` "ID BYTES only SIDE" strings, how many tokens differ)."""
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
    return out, popcount(diff)


def summary(us: list[float]) -> dict:
    """Mean, p50, p99 and max (nearest rank) of per-step times."""
    if not us:
        return {"mean": 0.0, "p50": 0.0, "p99": 0.0, "max": 0.0}
    s = sorted(us)

    def rank(q: float) -> float:
        return s[min(len(s), max(1, math.ceil(q * len(s)))) - 1]

    return {"mean": sum(s) / len(s), "p50": rank(0.5), "p99": rank(0.99), "max": s[-1]}


def run_peer(args) -> None:
    import numpy as np
    clock: Callable[[], float] = time.process_time if args.clock == "cpu" else time.perf_counter
    vocab_size, eos, tokens, special = load_dump(args.maskctl, args.tokenizer, args.cache)
    peer = PEERS[args.peer](vocab_size, eos, tokens, special)
    with open(args.case) as f:
        case = json.load(f)
    walk = case["tokens"]
    nw = (vocab_size + 31) // 32
    arr = np.zeros(nw, dtype=np.uint32)
    out = {"engine": args.peer}
    t0 = clock()
    peer.compile(case["kind"], case["constraint"])
    out["compile_ms"] = (clock() - t0) * 1e3
    t1 = clock()
    peer.mask_into(arr)
    out["first_mask_ms"] = (clock() - t1) * 1e3
    out["ttfm_ms"] = (clock() - t0) * 1e3
    # The first walk (the first mask again, now as step 0, as maskd does). A
    # token the peer refuses ends it there: the steps before are compared,
    # and the replays stop there too.
    masks, step_us = [], []
    walk_s = 0.0
    for step in range(len(walk) + 1):
        arr[:] = 0
        s0 = clock()
        peer.mask_into(arr)
        mask_s = clock() - s0
        walk_s += mask_s
        masks.append(arr.copy())
        if step == len(walk):
            break
        s0 = clock()
        try:
            peer.advance(walk[step])
        except RuntimeError:
            out["refused"] = {"step": step, "token": walk[step], "bytes": repr(tokens.get(walk[step], b""))}
            walk = walk[:step]
            break
        adv_s = clock() - s0
        walk_s += adv_s
        step_us.append((mask_s + adv_s) * 1e6)
    out["walk_ms"] = walk_s * 1e3
    out["step_us"] = summary(step_us)
    # Warm: replays of the same walk on a reset matcher over the same compiled
    # constraint (llguidance and xgrammar keep their caches in it).
    per_rep, warm_us = [], []
    for _ in range(args.warm_reps if walk else 0):
        peer.reset()
        r0 = clock()
        for t in walk:
            s0 = clock()
            peer.mask_into(arr)
            peer.advance(t)
            warm_us.append((clock() - s0) * 1e6)
        per_rep.append((clock() - r0) * 1e6 / len(walk))
    out["warm_step_us"] = statistics.median(per_rep) if per_rep else 0.0
    out["warm_us"] = summary(warm_us)
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
        elif len(diffs) < args.diff_steps:
            ex, n = describe_diff(a, b, tokens, limit=args.diff_examples)
            text = b"".join(tokens.get(t, b"") for t in walk[:i])
            diffs.append({"step": i, "tokens_differing": n, "only_maskd": popcount(a & ~b),
                          "only_peer": popcount(b & ~a), "examples": ex, "after": repr(text[-40:])})
    out["agree"] = agree
    out["compared"] = min(len(mine), len(masks))
    out["diffs"] = diffs
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", required=True, choices=sorted(PEERS))
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--case", required=True)
    ap.add_argument("--maskctl", default=os.path.join(ROOT, "build", "bin", "maskctl"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "coldpath-cache"))
    ap.add_argument("--warm-reps", type=int, default=10)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    ap.add_argument("--diff-steps", type=int, default=2, help="differing steps described")
    ap.add_argument("--diff-examples", type=int, default=3, help="tokens named per differing step")
    run_peer(ap.parse_args())


if __name__ == "__main__":
    main()
