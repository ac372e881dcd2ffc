"""SGLang: its own grammar path, driven step by step, with seeded random logits in
place of the model (SGLang's model runner does not start on a CPU: it needs sgl_kernel,
a CUDA build).

What runs is SGLang's code: the plugin loader (load_plugins: maskd's entry point adds
``--grammar-backend maskd``), prepare_server_args, ModelConfig, get_tokenizer, the
GrammarManager (create_grammar_backend, process_req_with_grammar, the compile futures
and get_ready_grammar_requests), Req with SamplingParams (finish state:
update_finish_state), SamplingBatchInfo.update_regex_vocab_mask + apply_logits_bias
(what ModelRunner._preprocess_logits calls: allocate, fill_vocab_mask_batched, move,
apply) and the batch result processor's _accept_grammar_tokens. What stands in for
SGLang: the logits (torch.randn, seeded), sampling (torch.multinomial at temperature 1,
instead of SGLang's Sampler, which is part of the model runner), and the loop that
calls these pieces once per decode step for the batch, as the scheduler does.

Kinds: regex -> ``regex``, json_schema -> ``json_schema``, gbnf -> ``ebnf`` (SGLang's
EBNF is XGrammar's, GBNF-like); lark -> ``ebnf`` too: SGLang's request has no Lark
field; the maskd backend recognises a Lark grammar there (its ``name:`` rules), XGrammar
does not, so with ``--backend builtin`` such a request is aborted by SGLang's grammar
manager and recorded in the notes. ``--backend builtin`` is XGrammar (SGLang's default
backend).
"""
from __future__ import annotations

import json
import os
import time
import types
from typing import Any, Dict, List, Optional, Tuple

import torch

from common import E2EContext, EngineResult, Request, Sample, batches

_SETUP: Dict[str, Any] = {}


def setup(ctx: E2EContext) -> Tuple[Any, Any, Any]:
    """SGLang's process state for one backend: server args published, ModelConfig,
    tokenizer, GrammarManager (which creates the grammar backend)."""
    if ctx.backend == "maskd":
        os.environ["MASKD_ADDR"] = ctx.maskd_addr
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.constrained.grammar_manager import GrammarManager
    from sglang.srt.plugins import load_plugins
    from sglang.srt.runtime_context import get_context, get_parallel
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils.hf_transformers_utils import get_tokenizer

    load_plugins()
    name = "maskd" if ctx.backend == "maskd" else "xgrammar"
    args = prepare_server_args(["--model-path", str(ctx.model_dir), "--device", "cpu",
                                "--grammar-backend", name])
    get_context().set_server_args(args)
    get_parallel().override_permanently(pp_rank=0, tp_rank=0)  # one process, one rank
    model_config = ModelConfig.from_server_args(args)
    tokenizer = get_tokenizer(str(ctx.model_dir))
    # The scheduler's attributes GrammarManager reads (one rank: no sync groups).
    group = types.SimpleNamespace(world_size=1, first_rank=0, is_first_rank=True)
    scheduler = types.SimpleNamespace(server_args=args, tokenizer=tokenizer,
                                      model_config=model_config, dp_tp_cpu_group=None,
                                      dp_tp_group=group, pp_group=None)
    manager = GrammarManager(scheduler)
    scheduler.grammar_manager = manager
    backend = manager.grammar_backend
    if ctx.backend == "maskd" and os.environ.get("MASKD_SGLANG_PREFETCH") == "0":
        backend.prefetch_enabled = False  # measurement: the Step sent at fill time
    return model_config, tokenizer, manager


def after_results_hook(manager: Any) -> Optional[Any]:
    """The maskd plugin's hook after Scheduler.process_batch_result (it sends the next
    Step early), called as the scheduler would; None for another backend. (SGLang's
    Scheduler itself is not run here: the hook is called with the stand-in scheduler.)"""
    from maskd.integrations import sglang as maskd_sglang
    if not isinstance(manager.grammar_backend, maskd_sglang.MaskdGrammarBackend):
        return None
    scheduler = manager.scheduler
    return lambda: maskd_sglang.prefetch_after_results(None, scheduler)


def _params(req: Request, max_tokens: int) -> Dict[str, Any]:
    p: Dict[str, Any] = {"max_new_tokens": max_tokens, "temperature": 1.0}
    key = {"regex": "regex", "json_schema": "json_schema", "gbnf": "ebnf", "lark": "ebnf"}
    p[key[req.kind]] = req.constraint
    return p


def make_req(tok: Any, model_config: Any, rid: str, prompt: str, prompt_ids: List[int],
             params: Dict[str, Any]) -> Any:
    """A Req as the scheduler makes one (Scheduler.handle_generate_request)."""
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams
    sp = SamplingParams(**params)
    sp.normalize(tok)
    return Req(rid, prompt, list(prompt_ids), sp, eos_token_ids=model_config.hf_eos_token_id,
               vocab_size=int(model_config.vocab_size))


def result_processor() -> Any:
    """SGLang's batch result processor, for its _accept_grammar_tokens (which reads no
    state of the processor; the scheduler mixes the class into itself)."""
    from sglang.srt.managers.scheduler_components.batch_result_processor import \
        SchedulerBatchResultProcessor
    return object.__new__(SchedulerBatchResultProcessor)


def _sampling_info(n: int, vocab: int, grammars: Optional[List[Any]]) -> Any:
    from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo
    ones = torch.ones(n)
    return SamplingBatchInfo(temperatures=ones.view(-1, 1), top_ps=ones,
                             top_ks=torch.full((n,), vocab, dtype=torch.int32),
                             min_ps=torch.zeros(n), is_all_greedy=False, is_any_greedy=False,
                             need_top_p_sampling=False, need_top_k_sampling=False,
                             need_min_p_sampling=False, vocab_size=vocab, grammars=grammars,
                             device="cpu")


def decode(reqs: List[Any], vocab: int, gen: torch.Generator, constrained: bool,
            processor: Any, step_ms: List[float], mask_ms: Optional[List[float]] = None,
            after_results: Optional[Any] = None) -> int:
    """Decode steps until every request is finished; returns the steps taken. step_ms
    gets each step's wall time, mask_ms (if given) the part spent in SGLang's vocab-mask
    update and apply (allocate, fill, move, apply). after_results() is called once the
    batch's tokens are accepted, where Scheduler.process_batch_result returns (the maskd
    plugin's prefetch hook runs there)."""
    steps = 0
    while True:
        live = [r for r in reqs if not r.finished()]
        if not live:
            return steps
        t0 = time.perf_counter()
        logits = torch.randn((len(live), vocab), generator=gen)  # the "model"
        grammars = [r.grammar for r in live] if constrained else None
        info = _sampling_info(len(live), vocab, grammars if grammars and any(grammars) else None)
        t1 = time.perf_counter()
        info.update_regex_vocab_mask()
        info.apply_logits_bias(logits)
        info.grammar_mask = None
        if mask_ms is not None:
            mask_ms.append(1000 * (time.perf_counter() - t1))
        tokens = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=gen).view(-1)
        for r, t in zip(live, tokens.tolist()):
            r.output_ids.append(t)
            r.update_finish_state(1)
            if r.grammar is not None:
                processor._accept_grammar_tokens(r, t)
                r.grammar.finished = r.finished()
        if after_results is not None:
            after_results()
        step_ms.append(1000 * (time.perf_counter() - t0))
        steps += 1


def run(ctx: E2EContext) -> EngineResult:
    import sglang
    from sglang.srt.managers.schedule_batch import FINISH_ABORT, FINISH_MATCHED_TOKEN

    torch.set_num_threads(1)
    model_config, tok, manager = setup(ctx)
    vocab = int(model_config.vocab_size)
    eos = set(model_config.hf_eos_token_id or ())
    processor = result_processor()
    prompt_ids = tok.encode(ctx.prompt)
    samples: List[Sample] = []
    notes: List[str] = []
    step_ms: List[float] = []
    mask_ms: List[float] = []
    steps, elapsed = 0, 0.0

    def make(rid: str, params: Dict[str, Any]) -> Any:
        return make_req(tok, model_config, rid, ctx.prompt, prompt_ids, params)

    for n, group in enumerate(batches(ctx.requests, ctx.batch)):
        reqs = [make(r.id, _params(r, ctx.max_tokens)) for r in group]
        for r in reqs:
            manager.process_req_with_grammar(r)
        while manager.has_waiting_grammars():
            manager.get_ready_grammar_requests()
        # Requests the grammar manager aborted (their constraint did not compile): the
        # scheduler would finish them without decoding. Recorded, no sample.
        aborted = {id(r) for r in reqs if isinstance(r.to_finish, FINISH_ABORT)}
        for req, r in zip(group, reqs):
            if id(r) in aborted:
                notes.append(f"{req.id} ({req.kind}) aborted: {r.to_finish.message}"[:400])
        pairs = [(req, r) for req, r in zip(group, reqs) if id(r) not in aborted]
        reqs = [r for _, r in pairs]
        gen = torch.Generator().manual_seed(ctx.seed + n)
        t0 = time.perf_counter()
        steps += decode(reqs, vocab, gen, True, processor, step_ms, mask_ms,
                        after_results_hook(manager))
        elapsed += time.perf_counter() - t0
        for req, r in pairs:
            ids = list(r.output_ids)
            finished = isinstance(r.finished_reason, FINISH_MATCHED_TOKEN)
            if ids and ids[-1] in eos:
                ids = ids[:-1]
            samples.append(Sample(req.id, tok.decode(ids, skip_special_tokens=False), ids,
                                  finished))
    if mask_ms:
        ordered = sorted(mask_ms)
        notes.append(f"vocab mask update+apply per step: mean {sum(ordered) / len(ordered):.2f} ms, "
                     f"p50 {ordered[len(ordered) // 2]:.2f} ms, max {ordered[-1]:.2f} ms")
    backend = manager.grammar_backend
    if ctx.backend == "maskd" and backend is not None:
        notes.append(f"maskd Step RPCs: {backend.steps} for {backend.step_rows} rows over "
                     f"{steps} decode steps ({backend.prefetched_rows} rows prefetched)")
    # Baseline: the same loop, batch and process without a grammar; every request runs to
    # max_tokens (EOS ignored) so each batch is max_tokens steps.
    base_ms: List[float] = []
    reqs = [make(f"u{i}", {"max_new_tokens": ctx.max_tokens, "temperature": 1.0,
                           "ignore_eos": True})
            for i in range(min(ctx.batch, len(ctx.requests)))]
    decode(reqs, vocab, torch.Generator().manual_seed(ctx.seed), False, processor, base_ms)
    base = sum(base_ms) / max(len(base_ms), 1)
    return EngineResult(engine_version=f"sglang {sglang.__version__}",
                        model="random-logits (seeded torch.randn over the tiny model's "
                              f"{vocab}-wide vocabulary; SGLang's model runner needs sgl_kernel)",
                        samples=samples, decode_steps=steps, constrained_s=elapsed,
                        unconstrained_ms_per_step=base, step_ms=step_ms, notes=notes)
