"""vLLM (CPU build): ``LLM.generate`` with standard ``StructuredOutputsParams``, constrained
by maskd exactly as docs/engines.md tells users (the maskd plugin, installed with the maskd
package, and the one setting MASKD_VLLM_ADDR), or by vLLM's own backend (``--backend
builtin``: structured_outputs_config backend "auto", i.e. XGrammar, with llguidance where
XGrammar refuses a request). Seeded temperature-1 sampling; maskd's budget mode is on (the
plugin passes each request's max_tokens). Requests of any constraints share a batch.

Steps are timed by wrapping the engine core's step (it runs in this process:
VLLM_ENABLE_V1_MULTIPROCESSING=0): a step is one scheduler step that ran the model (mask
fill, forward pass, sampling, for every request of the batch), the prefill step included.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, List

from common import E2EContext, EngineResult, Request, Sample, batches


def _params(req: Request) -> Any:
    from vllm.sampling_params import StructuredOutputsParams
    if req.kind == "regex":
        return StructuredOutputsParams(regex=req.constraint)
    if req.kind == "json_schema":
        return StructuredOutputsParams(json=req.constraint)
    return StructuredOutputsParams(grammar=req.constraint)  # Lark or GBNF: vLLM tells them apart


class StepClock:
    """Wraps the in-process engine core's ``step_fn`` and records the wall milliseconds of
    each step that ran the model (steps that only waited, e.g. for a grammar compile, are
    not counted)."""

    def __init__(self, core: Any) -> None:
        self.ms: List[float] = []
        step: Callable[[], Any] = core.step_fn

        def timed() -> Any:
            t0 = time.perf_counter()
            out = step()
            if out[1]:  # (outputs, model_executed)
                self.ms.append(1000 * (time.perf_counter() - t0))
            return out
        core.step_fn = timed


class CallClock:
    """Wraps one method of an object and sums its calls' wall seconds."""

    def __init__(self, obj: Any, name: str) -> None:
        self.s = 0.0
        self.calls = 0
        fn: Callable[..., Any] = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.s += time.perf_counter() - t0
                self.calls += 1
        setattr(obj, name, timed)


def _core(llm: Any) -> Any:
    """The engine core (in this process: VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    return llm.llm_engine.engine_core.engine_core


def run(ctx: E2EContext) -> EngineResult:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    if ctx.backend == "maskd":
        os.environ["MASKD_VLLM_ADDR"] = ctx.maskd_addr  # the one setting
    else:
        os.environ.pop("MASKD_VLLM_ADDR", None)
    import vllm
    from vllm import LLM, SamplingParams

    notes: List[str] = []
    t0 = time.perf_counter()
    llm = LLM(model=str(ctx.model_dir), enforce_eager=True, max_model_len=512, seed=ctx.seed,
              max_num_seqs=max(ctx.batch, 1))
    notes.append(f"vLLM start-up {time.perf_counter() - t0:.1f} s")
    eos = set(llm.get_tokenizer().all_special_ids) & {151645, 151643}
    clock = StepClock(_core(llm))
    # The structured-output work on the engine's critical path, either backend: the bitmask
    # fill of each step and the accept_tokens of each sampled token.
    manager = _core(llm).structured_output_manager
    fill, accept = CallClock(manager, "grammar_bitmask"), CallClock(manager, "accept_tokens")
    samples: List[Sample] = []
    elapsed = 0.0
    n = 0
    for group in batches(ctx.requests, ctx.batch):
        params = [SamplingParams(temperature=1.0, top_p=1.0, top_k=0, seed=ctx.seed + n + i,
                                 max_tokens=ctx.max_tokens, structured_outputs=_params(r))
                  for i, r in enumerate(group)]
        n += len(group)
        t1 = time.perf_counter()
        outs = llm.generate([ctx.prompt] * len(group), params, use_tqdm=False)
        elapsed += time.perf_counter() - t1
        for req, out in zip(group, outs):
            c = out.outputs[0]
            ids = list(c.token_ids)
            finished = c.finish_reason == "stop"
            if finished and ids and ids[-1] in eos:
                ids = ids[:-1]
            samples.append(Sample(req.id, c.text, ids, finished))
    step_ms, steps = list(clock.ms), len(clock.ms)
    notes.append(f"structured outputs on the critical path: bitmask fill "
                 f"{1000 * fill.s / max(steps, 1):.2f} ms/step, accept_tokens "
                 f"{1000 * accept.s / max(steps, 1):.2f} ms/step ({accept.calls} calls)")
    backend = manager.backend
    if ctx.backend == "maskd":
        if getattr(backend, "is_maskd", False):
            notes.append(f"maskd Step calls: {backend.steps} batched ({backend.prefetched} "
                         f"sent early), {backend.solo_steps} for one request, over {steps} "
                         f"engine steps; per step the engine waited "
                         f"{1000 * backend.step_s / max(steps, 1):.2f} ms for replies (within "
                         f"the fill) and spent {1000 * backend.send_s / max(steps, 1):.2f} ms "
                         f"sending early (after accept_tokens)")
        else:
            notes.append(f"structured-output backend is {type(backend).__name__}, not maskd")
    # Baseline: the same engine, batch and process, no constraint, every row runs to
    # max_tokens (ignore_eos), so a call is max_tokens steps (plus its prefill step).
    clock.ms.clear()
    rows = min(ctx.batch, len(ctx.requests))
    base = [SamplingParams(temperature=1.0, seed=ctx.seed + i, max_tokens=ctx.max_tokens,
                           ignore_eos=True) for i in range(rows)]
    llm.generate([ctx.prompt] * rows, base, use_tqdm=False)
    unconstrained = sum(clock.ms) / max(len(clock.ms), 1)
    return EngineResult(engine_version=vllm.__version__,
                        model=f"tiny random Llama ({ctx.model_dir.name}), vLLM CPU, bf16",
                        samples=samples, decode_steps=steps, constrained_s=elapsed,
                        unconstrained_ms_per_step=unconstrained, step_ms=step_ms, notes=notes)
