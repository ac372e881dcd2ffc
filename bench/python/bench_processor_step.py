#!/usr/bin/env python3
"""Per-step CPU time of ``MaskdLogitsProcessor.__call__`` without the RPC: the work from a
Step reply in hand to masked logits (the processor's own cost per decoding step).

    venv=$(scripts/setup_python.sh)
    $venv/bin/python bench/python/bench_processor_step.py [--steps 300] [--threads 1]

The processor's sessions are replaced by a stub whose ``step`` returns a fixed reply whose
rows each allow ``--allowed`` random ids (Qwen3 sizes: 151,669 tokenizer ids, 4,740 words
per row, logits 151,936 wide, float32), so only the adapter's per-step path is timed. Per
(rows, live rows): the median wall time and the median CPU time of the calling thread (less
disturbed by other load on the machine) per call, in microseconds; and in the same run, the
same CPU medians for

* ``masked_fill_`` alone with a ready (rows, width) bool mask of the same positions (what
  the processor did before it applied the packed words directly);
* the processor's apply alone (maskd._bitmask_torch, the processor's own applier) on the
  packed rows as the processor lays them out: the part of the call that the peers'
  applies below do, without the batch bookkeeping (the input_ids check, the tokens read,
  the reply's rows laid out);
* the in-process peers' torch CPU applies on the same packed rows, where they import
  (``llguidance.torch.apply_token_bitmask_inplace``, ``xgrammar.apply_token_bitmask_inplace``;
  scripts/bench_docs.sh puts build/bench-peers on PYTHONPATH): the rows as the processor
  lays them out (padding words zero, rows not live all ones), as an int32 tensor made
  once; their results are checked to be the processor's, bit for bit.

The processor's first call compiles its kernel (maskd._bitmask_torch) and is among the 5
warm-up calls left out. Prints one JSON line per case.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))
from maskd._common import StepReply  # noqa: E402
from maskd._bitmask_torch import as_words  # noqa: E402
from maskd.integrations._row_masks import PackedRows  # noqa: E402
from maskd.integrations.transformers import MaskdLogitsProcessor  # noqa: E402
from maskd.v1 import maskd_pb2 as pb  # noqa: E402

TOKENIZER_IDS = 151669
LOGITS = 151936
WORDS = (TOKENIZER_IDS + 31) // 32


class _StubSessions:
    """What the processor uses of RowSessions, answering every step with one reply."""

    def __init__(self, reply: StepReply, live: list):
        self.reply, self.live = reply, live
        self.done = [False] * len(live)

    def step(self, tokens):
        return self.reply, self.live

    def prefetch(self, tokens):
        pass

    def close(self):
        pass


def _reply(rows: int, allowed: int, rng: np.random.Generator) -> StepReply:
    """``rows`` mask rows, each allowing ``allowed`` random tokenizer ids."""
    resp = pb.StepResponse(words_per_row=WORDS)
    bits = np.zeros((rows, 32 * WORDS), np.uint8)
    for r in range(rows):
        resp.results.add()
        bits[r, rng.choice(TOKENIZER_IDS, size=allowed, replace=False)] = 1
    resp.masks = np.packbits(bits, axis=-1, bitorder="little").tobytes()
    return StepReply.from_proto(resp)


def peer_applies() -> dict:
    """name -> apply(logits, int32 bitmask), for the peers that import here."""
    out = {}
    try:
        import llguidance.torch as lt

        out["llguidance"] = lt.apply_token_bitmask_inplace
    except Exception as e:  # noqa: BLE001
        print(f"llguidance: not run ({type(e).__name__}: {e})", file=sys.stderr)
    try:
        import xgrammar as xgr

        out["xgrammar"] = xgr.apply_token_bitmask_inplace
    except Exception as e:  # noqa: BLE001
        print(f"xgrammar: not run ({type(e).__name__}: {e})", file=sys.stderr)
    return out


def _cpu_p50(fn, base: torch.Tensor, steps: int) -> tuple:
    """Median CPU µs of fn(fresh copy of base) over ``steps`` calls after 5 warm-ups, and
    the last result."""
    times = []
    for i in range(steps + 5):
        x = base.clone()
        c0 = time.thread_time()
        fn(x)
        c1 = time.thread_time()
        if i >= 5:
            times.append((c1 - c0) * 1e6)
    return round(statistics.median(times), 1), x


def case(rows: int, live_rows: int, allowed: int, steps: int, peers: dict) -> dict:
    rng = np.random.default_rng(rows * 1000 + live_rows)
    live = sorted(rng.choice(rows, size=live_rows, replace=False).tolist())
    # index_id and eos ids given: no call to a server (the channel is never used).
    proc = MaskdLogitsProcessor("unix:///nonexistent.sock", "qwen3", index_id="stub", eos_token_id=[0])
    proc.sessions = _StubSessions(_reply(live_rows, allowed, rng), live)
    ids = torch.zeros((rows, 8), dtype=torch.long)
    proc._prev = ids
    base = torch.randn(rows, LOGITS)
    # The baseline: the fill alone, with the positions the processor masks (a live row's
    # ids its mask does not allow, padding ids past the mask included; other rows none).
    disallowed = torch.zeros((rows, LOGITS), dtype=torch.bool)
    allowed_bits = np.unpackbits(np.frombuffer(proc.sessions.reply.masks.tobytes(), np.uint8)
                                 .reshape(live_rows, -1), axis=-1, bitorder="little")
    for k, r in enumerate(live):
        disallowed[r, :] = True
        disallowed[r, :32 * WORDS] = torch.from_numpy(allowed_bits[k] == 0)
    wall, cpu, fill_wall, fill_cpu = [], [], [], []
    for i in range(steps + 5):
        ids = torch.cat([ids, torch.zeros((rows, 1), dtype=torch.long)], dim=1)
        scores = base.clone()  # the model's fresh logits (not timed)
        w0, c0 = time.perf_counter(), time.thread_time()
        proc(ids, scores)
        c1, w1 = time.thread_time(), time.perf_counter()
        scores = base.clone()
        w2, c2 = time.perf_counter(), time.thread_time()
        scores.masked_fill_(disallowed, float("-inf"))
        c3, w3 = time.thread_time(), time.perf_counter()
        if i >= 5:
            wall.append((w1 - w0) * 1e6)
            cpu.append((c1 - c0) * 1e6)
            fill_wall.append((w3 - w2) * 1e6)
            fill_cpu.append((c3 - c2) * 1e6)
    out = {"rows": rows, "live": live_rows, "allowed": allowed,
           "wall_p50_us": round(statistics.median(wall), 1),
           "cpu_p50_us": round(statistics.median(cpu), 1),
           "fill_wall_p50_us": round(statistics.median(fill_wall), 1),
           "fill_cpu_p50_us": round(statistics.median(fill_cpu), 1)}
    # The peers, on the same packed rows as the processor lays them out.
    want = base.clone()
    proc(torch.cat([ids, torch.zeros((rows, 1), dtype=torch.long)], dim=1), want)
    words = as_words(PackedRows().rows(proc.sessions.reply.masks, live, rows, LOGITS)).clone()
    p50, got = _cpu_p50(lambda x: proc._applier.apply_(x, words), base, steps)
    if not torch.equal(got.view(torch.int32), want.view(torch.int32)):
        raise SystemExit("the apply alone differs from the processor's call")
    out["apply_cpu_p50_us"] = p50
    for name, apply in peers.items():
        p50, got = _cpu_p50(lambda x: apply(x, words), base, steps)
        if not torch.equal(got.view(torch.int32), want.view(torch.int32)):
            raise SystemExit(f"{name}: its masked logits differ from the processor's")
        out[f"{name}_cpu_p50_us"] = p50
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--allowed", type=int, default=2000, help="tokens each mask row allows")
    ap.add_argument("--cases", default="1x1,8x8,8x5,16x16,32x32,64x64,64x40",
                    help="rows x live rows, comma-separated")
    ap.add_argument("--no-peers", action="store_true", help="maskd's processor and the fill only")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    peers = {} if args.no_peers else peer_applies()
    for c in args.cases.split(","):
        rows, live = (int(x) for x in c.split("x"))
        print(json.dumps(case(rows, live, args.allowed, args.steps, peers)), flush=True)


if __name__ == "__main__":
    main()
