#!/usr/bin/env python3
"""Constrained generation in transformers: maskd (overlapped / not) vs unconstrained vs the
in-process peers, on one locally built random-weight Llama and the bundled Qwen3 tokenizer.

    venv=$(scripts/setup_python.sh)
    $venv/bin/pip install xgrammar llguidance            # optional peers (skipped when absent)
    build/bin/maskd --listen unix:///tmp/maskd-bench.sock --metrics-listen= &
    $venv/bin/python bench/python/bench_adapters.py --addr unix:///tmp/maskd-bench.sock

Per (constraint, batch, mode): wall time per generated token, the model's forward time per
step, and the time the constraint adds per step (p50, p99): the time from the logits being
ready to the end of the last logits processor, plus the time spent in stopping criteria
(where maskd's prefetch sends the Step). 128 new tokens (``min_new_tokens`` is not used: the
constraints below do not end early on a random model; rows that end early are counted as the
tokens they produced). Prints one JSON line per run and a Markdown table at the end.
"""
from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import statistics
import sys
import tempfile
import time

import torch
from transformers import (LlamaConfig, LlamaForCausalLM, LogitsProcessor, PreTrainedTokenizerFast,
                          StoppingCriteria)

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))
import maskd  # noqa: E402
from maskd.integrations.transformers import MaskdLogitsProcessor  # noqa: E402

EOS = [151643, 151645]
SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string"},
                         "items": {"type": "array", "items": {"type": "object", "properties": {
                             "id": {"type": "integer"}, "label": {"type": "string"}},
                             "required": ["id", "label"], "additionalProperties": False}}},
          "required": ["name", "items"], "additionalProperties": False}
REGEX = r"[A-Za-z ,.]{1,1000}"


class Clock:
    """Timestamps around the processors and criteria of one generate call."""

    def __init__(self):
        self.forward, self.added = [], []
        self.t_end = None       # end of the previous step (after the stopping criteria)
        self.t_logits = None    # logits ready (first processor entered)
        self.t_crit = None      # stopping criteria entered

    class First(LogitsProcessor):
        def __init__(self, c): self.c = c

        def __call__(self, input_ids, scores):
            self.c.t_logits = time.perf_counter()
            if self.c.t_end is not None:
                self.c.forward.append(self.c.t_logits - self.c.t_end)
            return scores

    class Last(LogitsProcessor):
        def __init__(self, c): self.c = c

        def __call__(self, input_ids, scores):
            self.c.t_proc_done = time.perf_counter()
            return scores

    class CritFirst(StoppingCriteria):
        def __init__(self, c): self.c = c

        def __call__(self, input_ids, scores, **kw):
            self.c.t_crit = time.perf_counter()
            return torch.zeros(input_ids.shape[0], dtype=torch.bool)

    class CritLast(StoppingCriteria):
        def __init__(self, c): self.c = c

        def __call__(self, input_ids, scores, **kw):
            now = time.perf_counter()
            c = self.c
            c.added.append((c.t_proc_done - c.t_logits) + (now - c.t_crit))
            c.t_end = now
            return torch.zeros(input_ids.shape[0], dtype=torch.bool)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def peer_processors(kind, constraint, tok, hf_tok_dir, vocab):
    """In-process peers' transformers processors, built where their package imports."""
    out = {}
    try:
        import outlines
        from outlines.backends.outlines_core import OutlinesCoreBackend

        om = outlines.from_transformers(MODEL, tok)
        be = OutlinesCoreBackend(om)
        out["outlines-core"] = (lambda: be.get_json_schema_logits_processor(json.dumps(constraint))
                                if kind == "schema" else be.get_regex_logits_processor(constraint))
    except Exception as e:  # noqa: BLE001
        print(f"outlines-core: not run ({type(e).__name__}: {e})", file=sys.stderr)
    try:
        import xgrammar as xgr
        import xgrammar.contrib.hf as xhf

        info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab)
        comp = xgr.GrammarCompiler(info)
        g = comp.compile_json_schema(json.dumps(constraint)) if kind == "schema" else comp.compile_regex(constraint)
        out["xgrammar"] = lambda: xhf.LogitsProcessor(g)
    except Exception as e:  # noqa: BLE001
        print(f"xgrammar: not run ({type(e).__name__}: {e})", file=sys.stderr)
    try:
        import llguidance
        import llguidance.hf
        import llguidance.torch as lt

        lltok = llguidance.hf.from_tokenizer(tok, n_vocab=vocab)
        grammar = (llguidance.LLMatcher.grammar_from_json_schema(json.dumps(constraint)) if kind == "schema"
                   else llguidance.LLMatcher.grammar_from_regex(constraint))

        class LLG(LogitsProcessor):
            """llguidance has no transformers processor; this is the loop vLLM's backend runs."""

            def __init__(self):
                self.m = None

            def __call__(self, input_ids, scores):
                if self.m is None:
                    self.m = [llguidance.LLMatcher(lltok, grammar) for _ in range(input_ids.shape[0])]
                    self.mask = lt.allocate_token_bitmask(input_ids.shape[0], vocab)
                else:
                    for i, t in enumerate(input_ids[:, -1].tolist()):
                        if not self.m[i].is_stopped():
                            self.m[i].consume_token(t)
                for i, m in enumerate(self.m):
                    lt.fill_next_token_bitmask(m, self.mask, i)
                lt.apply_token_bitmask_inplace(scores, self.mask)
                return scores

        out["llguidance"] = LLG
    except Exception as e:  # noqa: BLE001
        print(f"llguidance: not run ({type(e).__name__}: {e})", file=sys.stderr)
    return out


def run(model, tok, batch, max_new, mode, make_proc, prefetch):
    clock = Clock()
    procs = [Clock.First(clock)]
    crit = [Clock.CritFirst(clock)]
    p = make_proc() if make_proc else None
    if p is not None:
        procs.append(p)
        if prefetch:
            crit.append(p.prefetch)
    procs.append(Clock.Last(clock))
    crit.append(Clock.CritLast(clock))
    prompts = [f"Item {i}: describe it" for i in range(batch)]
    enc = tok(prompts, return_tensors="pt", padding=True)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(**enc, logits_processor=procs, stopping_criteria=crit, do_sample=True,
                             top_k=0, max_new_tokens=max_new, pad_token_id=tok.pad_token_id,
                             eos_token_id=EOS)
    wall = time.perf_counter() - t0
    gen = out[:, enc["input_ids"].shape[1]:]
    tokens = int(sum(next((i + 1 for i, t in enumerate(r) if t in EOS), len(r)) for r in gen.tolist()))
    if isinstance(p, MaskdLogitsProcessor):
        p.close()
    return {"mode": mode, "batch": batch, "tokens": tokens, "wall_s": wall,
            "ms_per_token": 1e3 * wall / tokens, "ms_per_step": 1e3 * wall / gen.shape[1],
            "forward_ms_p50": 1e3 * statistics.median(clock.forward),
            "added_ms_p50": 1e3 * pct(clock.added, 0.5), "added_ms_p99": 1e3 * pct(clock.added, 0.99)}


def main():
    global MODEL
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default="unix:///tmp/maskd.sock")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--constraints", default="schema,regex")
    ap.add_argument("--no-peers", action="store_true", help="unconstrained and maskd modes only")
    ap.add_argument("--idle-forward-ms", type=float, default=0.0,
                    help="add this much idle time (sleep) to every forward pass: a GPU engine's "
                         "forward, during which the host CPU is free")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    tmp = pathlib.Path(tempfile.mkdtemp())
    (tmp / "tokenizer.json").write_bytes(gzip.open(REPO / "data/tokenizers/qwen3/tokenizer.json.gz").read())
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tmp / "tokenizer.json"), eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", padding_side="left")
    torch.manual_seed(0)
    vocab = 151936
    model = LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=a.hidden, intermediate_size=4 * a.hidden,
                                         num_hidden_layers=a.layers, num_attention_heads=8,
                                         num_key_value_heads=4, eos_token_id=EOS, pad_token_id=151643)).eval()
    MODEL = model
    if a.idle_forward_ms > 0:
        real_forward = model.forward

        def forward(*args, **kw):
            time.sleep(a.idle_forward_ms / 1e3)
            return real_forward(*args, **kw)

        model.forward = forward
    client = maskd.Client(a.addr)
    rows = []
    for kind, constraint in (("schema", SCHEMA), ("regex", REGEX)):
        if kind not in a.constraints.split(","):
            continue
        kw = {"json_schema": SCHEMA} if kind == "schema" else {"regex": REGEX}
        ix = client.compile("qwen3", **kw).index_id
        modes = [("unconstrained", None, False),
                 ("maskd overlapped", lambda: MaskdLogitsProcessor(client, "qwen3", index_id=ix), True),
                 ("maskd not overlapped", lambda: MaskdLogitsProcessor(client, "qwen3", index_id=ix), False)]
        if not a.no_peers:
            modes += [(name, mk, False)
                      for name, mk in peer_processors(kind, constraint, tok, tmp, vocab).items()]
        for batch in [int(b) for b in a.batches.split(",")]:
            run(model, tok, batch, 8, "warm-up", modes[1][1], True)
            for _ in range(a.repeat):
                for name, mk, pf in modes:
                    r = run(model, tok, batch, a.max_new, name, mk, pf)
                    r["constraint"] = kind
                    print(json.dumps(r), flush=True)
                    rows.append(r)
    print("\n| constraint | batch | mode | tokens | ms / token | ms / step | forward ms / step (p50) "
          "| added ms / step p50 | p99 | vs unconstrained |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    base = {}
    for r in rows:
        if r["mode"] == "unconstrained":
            base[(r["constraint"], r["batch"])] = r["ms_per_step"]
    for r in rows:
        ratio = r["ms_per_step"] / base[(r["constraint"], r["batch"])]
        print(f"| {r['constraint']} | {r['batch']} | {r['mode']} | {r['tokens']} | {r['ms_per_token']:.2f} "
              f"| {r['ms_per_step']:.2f} | {r['forward_ms_p50']:.2f} | {r['added_ms_p50']:.2f} "
              f"| {r['added_ms_p99']:.2f} | {ratio:.3f}x |")


if __name__ == "__main__":
    main()
