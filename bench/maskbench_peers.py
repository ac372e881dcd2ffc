#!/usr/bin/env python3
"""Whether llguidance or XGrammar compiles given MaskBench schemas, and their verdicts on the
schemas' tests (docs/benchmarks.md, "JSON Schema routes": the schemas maskd refuses on a limit).

  .venv-bench/bin/python bench/maskbench_peers.py --peer llguidance|xgrammar \\
      --file ../shared/corpora/maskbench-dev/JsonSchemaStore.jsonl --names eslintrc,typo3 ...

Each peer gets the exact token bytes maskd loads (bench/peers.py, `maskctl vocab --dump`) and the
layout maskctl maskbench uses (json.dumps separators, no free whitespace; XGrammar's strict mode
off); a test's text is walked as maskctl walks it (the longest allowed token that spells what
remains, then EOS). Prints one line per schema: compiled, and (valid, accepted) per test; or the
peer's error.

  .venv-bench/bin/python bench/maskbench_peers.py --peer llguidance --file big.jsonl --time

--time: every schema of the files unless --names, and per schema its compile + first mask in
this process's CPU time (the tokenizer loaded before; the peer's own caches across schemas kept,
as a serving process keeps them), then a summary line: TTFM p50 / p99 / max over the schemas it
compiled (p99 nearest rank), the figures `maskctl maskbench --fresh --cpu-time` prints for maskd.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import peers  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", choices=["llguidance", "xgrammar"], required=True)
    ap.add_argument("--file", action="append", required=True, help="a MaskBench .jsonl (repeatable)")
    ap.add_argument("--names", help="comma-separated schema names (file name without .json); "
                    "every schema when omitted with --time")
    ap.add_argument("--time", action="store_true", help="time compile + first mask (CPU time)")
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(ROOT), "shared", "tokenizers", "llama3"))
    ap.add_argument("--maskctl", default=os.path.join(ROOT, "build", "bin", "maskctl"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "peer-cache"))
    args = ap.parse_args()
    if args.names is None and not args.time:
        ap.error("--names is required without --time")
    vocab_size, eos, tokens, special = peers.load_dump(args.maskctl, args.tokenizer, args.cache)
    by_bytes: dict[bytes, list[int]] = {}
    for i, b in tokens.items():
        if i not in special and b:
            by_bytes.setdefault(b, []).append(i)
    max_len = max(len(b) for b in by_bytes)
    words = (vocab_size + 31) // 32

    def walk(mask_into, advance, text: str) -> bool:
        arr, b, i = np.zeros(words, np.uint32), text.encode(), 0
        while i < len(b):
            mask_into(arr)
            for n in range(min(max_len, len(b) - i), 0, -1):
                ids = [t for t in by_bytes.get(b[i:i + n], []) if (arr[t >> 5] >> (t & 31)) & 1]
                if ids:
                    advance(ids[0])
                    i += n
                    break
            else:
                return False
        mask_into(arr)
        return any((arr[e >> 5] >> (e & 31)) & 1 for e in eos)

    wanted = set(args.names.split(",")) if args.names else None
    ttfm_ms: list[float] = []
    peer = (peers.LLGuidancePeer if args.peer == "llguidance" else peers.XGrammarPeer)(
        vocab_size, eos, tokens, special)
    for path in args.file:
        for line in open(path):
            d = json.loads(line)
            name = os.path.basename(d.get("description", "")).replace(".json", "")
            if wanted is not None and name not in wanted:
                continue
            schema = d["schema"] if isinstance(d["schema"], str) else json.dumps(d["schema"])
            try:
                t0 = time.process_time()
                if args.peer == "llguidance":
                    ll = peer.ll
                    g = ll.LLMatcher.grammar_from_json_schema(
                        schema, defaults={"whitespace_flexible": False, "item_separator": ", ",
                                          "key_separator": ": "})
                    m = ll.LLMatcher(peer.tok, g, log_level=0)
                    if m.is_error():
                        raise RuntimeError(m.get_error())
                    mask_into = lambda a, m=m: m.unsafe_compute_mask_ptr(a.ctypes.data, a.nbytes)
                    advance = m.consume_token
                else:
                    c = peer.xgr.GrammarCompiler(peer.info, max_threads=1, cache_enabled=False)
                    m = peer.xgr.GrammarMatcher(c.compile_json_schema(
                        schema, any_whitespace=False, separators=(", ", ": "), strict_mode=False))
                    mask_into = lambda a, m=m: m.fill_next_token_bitmask(a.view(np.int32).reshape(1, -1))
                    advance = m.accept_token
                if args.time:
                    mask_into(np.zeros(words, np.uint32))
                    ttfm_ms.append((time.process_time() - t0) * 1e3)
                    print("%s %s: ttfm %.2f ms" % (args.peer, name, ttfm_ms[-1]))
                    continue
                verdicts = []
                for t in d.get("tests", []):
                    m.reset()
                    verdicts.append((t["valid"], walk(mask_into, advance, t["text"])))
                print("%s %s: compiled; tests (valid, accepted): %s" % (args.peer, name, verdicts))
            except Exception as e:  # the peer's refusal, reported
                print("%s %s: error: %s" % (args.peer, name, str(e)[:200]))
    if args.time and ttfm_ms:
        ttfm_ms.sort()
        pick = lambda q: ttfm_ms[min(len(ttfm_ms) - 1, max(0, -(-len(ttfm_ms) * q // 100) - 1))]
        print("%s: compiled %d; TTFM p50 %.2f ms, p99 %.2f ms, max %.2f ms"
              % (args.peer, len(ttfm_ms), pick(50), pick(99), ttfm_ms[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
