"""python -m maskd --addr ADDR health|compile|generate: a quick check, mirroring maskctl.

One JSON object per line on stdout; errors on stderr and exit 2 (health: exit 3
when the status is not SERVING).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any, Dict, List, Optional

from maskd import Client, Grammar, MaskdError
from maskd.masks import allowed_tokens


def _constraint(a: argparse.Namespace) -> Dict[str, Any]:
    if sum(x is not None for x in (a.regex, a.json_schema, a.grammar, a.structural_tag)) != 1:
        raise SystemExit("give exactly one of --regex, --json-schema FILE, --grammar FILE or "
                         "--structural-tag FILE")
    if a.regex is not None:
        return {"regex": a.regex}
    if a.grammar is not None:
        fmt = a.format or a.grammar.rsplit(".", 1)[-1]
        if fmt not in ("lark", "gbnf", "ebnf"):
            raise SystemExit(f"{a.grammar}: give --format lark|gbnf|ebnf")
        with open(a.grammar, encoding="utf-8") as f:
            return {"grammar": Grammar(f.read(), fmt)}
    if a.structural_tag is not None:
        with open(a.structural_tag, encoding="utf-8") as f:
            return {"structural_tag": f.read()}
    with open(a.json_schema, encoding="utf-8") as f:
        return {"json_schema": f.read()}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m maskd", description=__doc__.splitlines()[0])
    ap.add_argument("--addr", default="unix:///tmp/maskd.sock")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per call")
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("health", help='{"status": "SERVING"}')
    h.add_argument("--service", default="")
    for name in ("compile", "generate"):
        p = sub.add_parser(name)
        p.add_argument("--tokenizer", required=True)
        p.add_argument("--regex")
        p.add_argument("--json-schema", metavar="FILE")
        p.add_argument("--grammar", metavar="FILE", help="a grammar file (.lark, .gbnf, .ebnf)")
        p.add_argument("--format", choices=("lark", "gbnf", "ebnf"),
                       help="the grammar's format; default: the file's extension")
        p.add_argument("--structural-tag", metavar="FILE", help="a structural tag (JSON)")
        if name == "compile":
            p.add_argument("--eager", action="store_true",
                           help="build the whole DFA and every state's mask at compile")
            p.add_argument("--eager-dfa", action="store_true",
                           help="build a regex's whole DFA at compile (masks as sessions need them)")
            p.add_argument("--no-wait", action="store_true")
            p.add_argument("--timeout-ms", type=int, default=0)
        else:
            p.add_argument("--seed", type=int, default=0)
            p.add_argument("--max-tokens", type=int, default=64)
            p.add_argument("--no-budget", action="store_true",
                           help="no budget mode: the output may be cut at --max-tokens")
    a = ap.parse_args(argv)
    try:
        with Client(a.addr, timeout=a.timeout, client_name="maskctl") as c:
            if a.cmd == "health":
                status = c.health(a.service)
                print(json.dumps({"status": status}))
                return 0 if status == "SERVING" else 3
            if a.cmd == "compile":
                r = c.compile(a.tokenizer, eager=a.eager, eager_dfa=a.eager_dfa, wait=not a.no_wait,
                              timeout_ms=a.timeout_ms, **_constraint(a))
                state = {1: "compiling", 2: "ready", 3: "failed"}.get(r.state, "unspecified")
                print(json.dumps({"index_id": r.index_id, "state": state, "route": r.route,
                                  "dfa_states": r.dfa_states, "compile_ms": r.compile_ms}))
                return 0
            # generate: one session, uniform random choice among the allowed tokens (EOS
            # included); budget mode (max_tokens_left: --max-tokens minus the tokens so far)
            # unless --no-budget, so the output closes within --max-tokens.
            s = c.create_session(tokenizer=a.tokenizer, **_constraint(a))
            rng = random.Random(a.seed)
            tokens: List[int] = []
            entry: List[int] = []
            finished = False
            try:
                while True:
                    left = 0 if a.no_budget else a.max_tokens - len(tokens)
                    reply = c.step([(s.session_id, entry, 0, left)]).raise_for_status()
                    finished = reply.results[0].finished
                    if finished or len(tokens) >= a.max_tokens:
                        break
                    allowed = allowed_tokens(reply.masks[0])
                    if not allowed:
                        break
                    t = rng.choice(allowed)
                    tokens.append(t)
                    entry = [t]
                text = c.detokenize(a.tokenizer, tokens)
            finally:
                c.close_session(s.session_id)
            print(json.dumps({"session_id": str(s.session_id), "tokens": tokens,
                              "text": text.decode(errors="replace"), "text_hex": text.hex(),
                              "finished": finished}))
            return 0
    except MaskdError as e:
        print(f"{a.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
