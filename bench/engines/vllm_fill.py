"""The vLLM backend's share of an engine step, without vLLM's scheduler or model: what
`fill_bitmask` costs per row when the mask is there, and how long the first fill waits for
the early Step's reply when the engine gives maskd `--gap-ms` (the forward pass) between the
send and the fill. Runs the real MaskdBackend against a real maskd (build/bin/maskd or
$MASKD_BIN) in the vLLM venv:

    venv=$(scripts/engine_venv.sh vllm)
    $venv/bin/python bench/engines/vllm_fill.py [--requests 16] [--steps 40] [--gap-ms 5]

Prints one JSON line. Each step: every request accepts one allowed token (its row's first
allowed id), the backend sends the step's Step early (`prefetch`, as the plugin does after
vLLM's update_from_output), the engine sleeps `--gap-ms`, then vLLM's fill order runs
(`fill_bitmask` for every row). A request whose constraint has ended is compiled again, so
the batch stays full.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import List

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "engines"))
sys.path.insert(0, str(REPO / "tests" / "python"))

import tiny_model  # noqa: E402
from conftest import MaskdServer  # noqa: E402  (tests/python: a maskd on a private socket)
from maskd.integrations.vllm import MaskdBackend, MaskdGrammar  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402
from vllm.v1.structured_output.backend_types import StructuredOutputOptions as Opt  # noqa: E402

REGEX = r"[0-9]{3}-[0-9]{4}( ext\. [0-9]{1,3})?"


def first_allowed(row: np.ndarray) -> int:
    words = np.flatnonzero(row)
    w = int(words[0])
    bits = int(row[w])
    return w * 32 + (bits & -bits).bit_length() - 1


def pct(xs: List[float], q: float) -> float:
    return float(np.percentile(np.array(xs), q)) if xs else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--gap-ms", type=float, default=5.0)
    args = ap.parse_args()
    server = MaskdServer()
    try:
        b = MaskdBackend(None, tokenizer=get_tokenizer(str(tiny_model.hf_model_dir())),
                         vocab_size=tiny_model.SHAPE["vocab_size"], addr=server.addr)
        new = lambda: b.compile_grammar(Opt.REGEX, REGEX, max_tokens=64)  # noqa: E731
        gs: List[MaskdGrammar] = [new() for _ in range(args.requests)]
        bm = b.allocate_token_bitmask(256)
        rows = bm.numpy()
        for i, g in enumerate(gs):
            g.fill_bitmask(bm, i)
        t = time.perf_counter()
        for _ in range(100):
            for i, g in enumerate(gs):
                g.fill_bitmask(bm, i)
        cached_row_us = (time.perf_counter() - t) / (100 * len(gs)) * 1e6
        fill_ms: List[float] = []
        send_ms: List[float] = []
        for _ in range(args.steps):
            for i, g in enumerate(gs):
                if g.is_terminated():
                    gs[i] = g = new()
                    g.fill_bitmask(bm, i)
                g.accept_tokens("r", [first_allowed(rows[i].view(np.uint32))])
            t0 = time.perf_counter()
            b.prefetch()
            send_ms.append(1e3 * (time.perf_counter() - t0))
            time.sleep(args.gap_ms / 1e3)
            t1 = time.perf_counter()
            for i, g in enumerate(gs):
                g.fill_bitmask(bm, i)
            fill_ms.append(1e3 * (time.perf_counter() - t1))
        b.destroy()
    finally:
        server.stop()
    print(json.dumps({
        "requests": args.requests, "steps": args.steps, "gap_ms": args.gap_ms,
        "cached_fill_us_per_row": round(cached_row_us, 2),
        "fill_ms_p50": round(pct(fill_ms, 50), 3), "fill_ms_p99": round(pct(fill_ms, 99), 3),
        "fill_ms_max": round(max(fill_ms), 3),
        "send_ms_p50": round(pct(send_ms, 50), 3), "send_ms_max": round(max(send_ms), 3)}))


if __name__ == "__main__":
    main()
