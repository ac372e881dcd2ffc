"""transformers: ``model.generate`` with maskd's MaskdLogitsProcessor (and its prefetch
StoppingCriteria), exactly as docs/python.md tells users. transformers has no grammar
backend of its own, so ``--backend builtin`` generates unconstrained (the baseline).

Rows of one generate call share one constraint (a LogitsProcessor has one), so a batch
is up to B requests with the same constraint (grouping.py)."""
from __future__ import annotations

import time
from typing import Any, List

import numpy as np
import torch
import transformers
from transformers import AutoTokenizer, LlamaForCausalLM, StoppingCriteria

import maskd
from maskd.integrations.transformers import MaskdLogitsProcessor

from common import E2EContext, EngineResult, Sample
from grouping import same_constraint_batches


class StepClock(StoppingCriteria):
    """Records the wall time of every decode step (transformers calls it once per step,
    after sampling); never stops generation."""

    def __init__(self) -> None:
        self.stamps: List[float] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor,
                 **kwargs: Any) -> torch.BoolTensor:
        self.stamps.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool)


def constraint(kind: str, text: str) -> dict:
    if kind == "regex":
        return {"regex": text}
    if kind == "json_schema":
        return {"json_schema": text}
    return {"grammar": maskd.Grammar(text, kind)}


def generate(model: Any, inputs: Any, rows: int, max_tokens: int, seed: int,
             procs: list, stops: list, min_tokens: int = 0) -> Any:
    torch.manual_seed(seed)
    return model.generate(**inputs, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                          num_return_sequences=rows, max_new_tokens=max_tokens,
                          min_new_tokens=min_tokens, logits_processor=procs,
                          stopping_criteria=stops)


def run(ctx: E2EContext) -> EngineResult:
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(ctx.model_dir)
    model = LlamaForCausalLM.from_pretrained(ctx.model_dir, torch_dtype=torch.float32).eval()
    inputs = tok(ctx.prompt, return_tensors="pt")
    prompt_len = inputs["input_ids"].shape[1]
    eos = set(model.generation_config.eos_token_id)
    client = maskd.Client(ctx.maskd_addr) if ctx.backend == "maskd" else None
    rows = min(ctx.batch, len(ctx.requests))
    with torch.no_grad():  # warm-up: torch's first calls are not a decode step's cost
        generate(model, inputs, rows, 2, ctx.seed, [], [])
    if client is not None:
        # maskd's torch apply compiles on its first use per (dtype, one row or several):
        # seconds, once per process (docs/python.md); not a decode step's cost either.
        words = -(-model.config.vocab_size // 32)
        for n in {1, rows}:
            maskd.apply_mask(torch.zeros(n, model.config.vocab_size),
                             np.full((n, words), 0xFFFFFFFF, np.uint32))
    samples: List[Sample] = []
    step_ms: List[float] = []
    steps, elapsed = 0, 0.0
    for n, group in enumerate(same_constraint_batches(ctx.requests, ctx.batch)):
        procs: list = []
        stops: list = []
        if client is not None:
            p = MaskdLogitsProcessor(client, ctx.tokenizer, max_new_tokens=ctx.max_tokens,
                                     **constraint(group[0].kind, group[0].constraint))
            procs, stops = [p], [p.prefetch]
        clock = StepClock()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = generate(model, inputs, len(group), ctx.max_tokens, ctx.seed + n, procs,
                           stops + [clock])
        elapsed += time.perf_counter() - t0
        for p in procs:
            p.close()
        steps += len(clock.stamps)
        marks = [t0] + clock.stamps
        step_ms += [1000 * (b - a) for a, b in zip(marks, marks[1:])]
        for req, row in zip(group, out[:, prompt_len:].tolist()):
            ids = [t for t in row]
            cut = next((i for i, t in enumerate(ids) if t in eos), None)
            finished = cut is not None
            ids = ids[:cut] if finished else ids
            samples.append(Sample(req.id, tok.decode(ids, clean_up_tokenization_spaces=False),
                                  ids, finished))
    # Baseline: the same model, batch and process, no constraint, every row runs to
    # max_tokens (min_new_tokens) so each call is max_tokens steps.
    clock = StepClock()
    t0 = time.perf_counter()
    with torch.no_grad():
        generate(model, inputs, min(ctx.batch, len(ctx.requests)), ctx.max_tokens, ctx.seed,
                 [], [clock], min_tokens=ctx.max_tokens)
    base = 1000 * (time.perf_counter() - t0) / max(len(clock.stamps), 1)
    return EngineResult(engine_version=transformers.__version__,
                        model=f"tiny random Llama ({ctx.model_dir.name}), CPU fp32",
                        samples=samples, decode_steps=steps, constrained_s=elapsed,
                        unconstrained_ms_per_step=base, step_ms=step_ms,
                        notes=[] if client else ["transformers has no built-in constraint "
                                                 "backend: builtin is unconstrained"])
