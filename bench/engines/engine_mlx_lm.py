"""mlx-lm (MLX's CPU build): ``stream_generate`` (batch 1) or ``batch_generate`` with
maskd's mlx-lm logits processor, as docs/python.md tells users. mlx-lm has no grammar
backend of its own, so ``--backend builtin`` generates unconstrained (the baseline).

A batch is up to B requests with the same constraint (grouping.py): a processor holds
one constraint."""
from __future__ import annotations

import time
from typing import Any, List

import mlx.core as mx
import mlx_lm
from mlx_lm import batch_generate, load, stream_generate
from mlx_lm.sample_utils import make_sampler

import maskd
from maskd.integrations.mlx_lm import MaskdLogitsProcessor

from common import E2EContext, EngineResult, Sample
from grouping import same_constraint_batches
from engine_transformers import constraint


def version() -> str:
    return getattr(mlx_lm, "__version__", "unknown")


class NoEos:
    """The baseline's processor: EOS never sampled, so each row runs max_tokens steps."""

    def __init__(self, eos: List[int]):
        self.eos = mx.array(eos)

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        logits[:, self.eos] = -float("inf")
        return logits


def run_batch(model: Any, tok: Any, prompt: List[int], rows: int, max_tokens: int,
              procs: list) -> tuple:
    """(token id lists, step timestamps): stream_generate for one row (a stamp per
    token), batch_generate for several (one stamp: the end)."""
    sampler = make_sampler(temp=1.0)
    if rows == 1:
        ids, stamps = [], []
        for r in stream_generate(model, tok, prompt, max_tokens=max_tokens, sampler=sampler,
                                 logits_processors=procs):
            ids.append(r.token)
            stamps.append(time.perf_counter())
        return [ids], stamps
    res = batch_generate(model, tok, [prompt] * rows, max_tokens=max_tokens, sampler=sampler,
                         logits_processors=procs, return_token_ids=True)
    return [list(map(int, t)) for t in res.token_ids], [time.perf_counter()]


def run(ctx: E2EContext) -> EngineResult:
    model, tok = load(str(ctx.model_dir))
    prompt = tok.encode(ctx.prompt)
    eos = [int(e) for e in tok.eos_token_ids]
    client = maskd.Client(ctx.maskd_addr) if ctx.backend == "maskd" else None
    run_batch(model, tok, prompt, min(ctx.batch, len(ctx.requests)), 2, [])  # warm-up
    samples: List[Sample] = []
    step_ms: List[float] = []
    steps, elapsed = 0, 0.0
    notes: List[str] = [] if client else ["mlx-lm has no built-in constraint backend: "
                                          "builtin is unconstrained"]
    for n, group in enumerate(same_constraint_batches(ctx.requests, ctx.batch)):
        mx.random.seed(ctx.seed + n)
        procs: list = []
        if client is not None:
            procs = [MaskdLogitsProcessor(client, ctx.tokenizer, max_tokens=ctx.max_tokens,
                                          **constraint(group[0].kind, group[0].constraint))]
        t0 = time.perf_counter()
        rows, stamps = run_batch(model, tok, prompt, len(group), ctx.max_tokens, procs)
        elapsed += time.perf_counter() - t0
        for p in procs:
            p.close()
        steps += max(len(r) for r in rows)
        if len(group) == 1:
            marks = [t0] + stamps
            step_ms += [1000 * (b - a) for a, b in zip(marks, marks[1:])]
        for req, ids in zip(group, rows):
            cut = next((i for i, t in enumerate(ids) if t in eos), None)
            finished = cut is not None or (len(group) > 1 and len(ids) < ctx.max_tokens)
            ids = ids[:cut] if cut is not None else ids
            samples.append(Sample(req.id, tok.decode(ids), ids, finished))
    if len(step_ms) == 0:
        notes.append("batch_generate reports no per-step times: p99 not measured")
    rows = min(ctx.batch, len(ctx.requests))
    mx.random.seed(ctx.seed)
    t0 = time.perf_counter()
    run_batch(model, tok, prompt, rows, ctx.max_tokens, [NoEos(eos)])
    base = 1000 * (time.perf_counter() - t0) / ctx.max_tokens
    return EngineResult(engine_version=version(),
                        model=f"tiny random Llama ({ctx.model_dir.name}), MLX CPU",
                        samples=samples, decode_steps=steps, constrained_s=elapsed,
                        unconstrained_ms_per_step=base, step_ms=step_ms, notes=notes)
