"""llama.cpp through llama-cpp-python: ``Llama.generate`` with maskd's
MaskdLogitsProcessor (maskd.integrations.llama_cpp) in budget mode, or llama.cpp's own
grammar sampler (``--backend builtin``): LlamaGrammar for GBNF, and for JSON Schema the
GBNF that llama-cpp-python's json-schema converter writes. llama.cpp has no regex or
Lark front end, so under builtin those requests are skipped (a note says so).

The model is the tiny GGUF of tiny_gguf.py: ctx.model_dir when it names a .gguf file
(``model_path()`` below is what e2e.py could pass instead of tiny_model.hf_model_dir(),
which needs transformers, not installed in this engine's venv), else gguf_model_path(). llama-cpp-python generates one sequence at a time, so a batch of
B requests runs as B generations one after the other (a note says so when B > 1).
Sampling: temperature 1, no top-k/top-p/min-p, seeded per request; one CPU thread.
"""
from __future__ import annotations

import pathlib
import time
from typing import Any, List, Optional, Tuple

import llama_cpp
from llama_cpp import Llama, LlamaGrammar, LogitsProcessorList

import maskd
from maskd.integrations.llama_cpp import MaskdLogitsProcessor

from common import E2EContext, EngineResult, Request, Sample
from tiny_gguf import gguf_model_path


def model_path() -> pathlib.Path:
    """This engine's model: the tiny GGUF (built on first use)."""
    return gguf_model_path()


def load(path: Optional[pathlib.Path] = None, n_ctx: int = 512) -> Llama:
    return Llama(str(path or gguf_model_path()), n_ctx=n_ctx, n_threads=1, n_threads_batch=1,
                 seed=0, verbose=False)


def maskd_processor(client: Any, tokenizer: str, req: Request,
                    max_tokens: int) -> MaskdLogitsProcessor:
    kind = req.kind
    kw: dict = ({"regex": req.constraint} if kind == "regex" else
                {"json_schema": req.constraint} if kind == "json_schema" else
                {"grammar": maskd.Grammar(req.constraint, kind)})
    return MaskdLogitsProcessor(client, tokenizer, max_new_tokens=max_tokens, **kw)


def builtin_grammar(req: Request) -> Optional[LlamaGrammar]:
    """llama.cpp's own constraint for `req`; None where llama.cpp has none (regex, Lark)."""
    if req.kind == "gbnf":
        return LlamaGrammar.from_string(req.constraint, verbose=False)
    if req.kind == "json_schema":
        return LlamaGrammar.from_json_schema(req.constraint, verbose=False)
    return None


def generate(llm: Llama, prompt: List[int], max_tokens: int, seed: int,
             processor: Any = None, grammar: Optional[LlamaGrammar] = None,
             stop_at_eos: bool = True) -> Tuple[List[int], bool, List[float]]:
    """One sequence: (generated ids without the EOS, ended by EOS, per-step ms)."""
    llm.set_seed(seed)
    procs = LogitsProcessorList([processor]) if processor is not None else None
    ids: List[int] = []
    finished = False
    step_ms: List[float] = []
    last = time.perf_counter()
    for tok in llm.generate(prompt, top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0, temp=1.0,
                            repeat_penalty=1.0, logits_processor=procs, grammar=grammar):
        now = time.perf_counter()
        step_ms.append(1000 * (now - last))
        last = now
        if stop_at_eos and llama_cpp.llama_vocab_is_eog(llm._model.vocab, tok):
            finished = True
            break
        ids.append(tok)
        if len(ids) >= max_tokens:
            break
    return ids, finished, step_ms


def text_of(llm: Llama, ids: List[int]) -> str:
    return llm.detokenize(ids).decode("utf-8", errors="replace")


def run(ctx: E2EContext) -> EngineResult:
    path = ctx.model_dir if ctx.model_dir.suffix == ".gguf" else gguf_model_path()
    llm = load(path)
    prompt = llm.tokenize(ctx.prompt.encode(), add_bos=False, special=True)
    client = maskd.Client(ctx.maskd_addr) if ctx.backend == "maskd" else None
    samples: List[Sample] = []
    step_ms: List[float] = []
    notes: List[str] = []
    skipped: List[str] = []
    for n, req in enumerate(ctx.requests):
        proc, grammar = None, None
        if client is not None:
            proc = maskd_processor(client, ctx.tokenizer, req, ctx.max_tokens)
        else:
            grammar = builtin_grammar(req)
            if grammar is None:
                skipped.append(req.id)
                continue
        ids, finished, ms = generate(llm, prompt, ctx.max_tokens, ctx.seed + n, proc, grammar)
        if proc is not None:
            proc.close()
        step_ms += ms
        samples.append(Sample(req.id, text_of(llm, ids), ids, finished))
    # Baseline: the same model and process, no constraint, max_tokens steps (EOS ignored).
    _, _, base = generate(llm, prompt, ctx.max_tokens, ctx.seed, stop_at_eos=False)
    if skipped:
        notes.append("builtin: llama.cpp has no regex or Lark front end (GBNF only, and JSON "
                     "Schema through llama-cpp-python's converter to GBNF); skipped: "
                     + ", ".join(skipped))
    if ctx.batch > 1:
        notes.append("llama-cpp-python generates one sequence at a time: a batch runs its "
                     "requests one after the other")
    # The first step of each sequence includes the prompt's prefill.
    return EngineResult(engine_version=f"llama-cpp-python {llama_cpp.__version__}",
                        model=f"tiny random Llama GGUF ({path.name}), CPU f16",
                        samples=samples, decode_steps=len(step_ms),
                        constrained_s=sum(step_ms) / 1000,
                        unconstrained_ms_per_step=sum(base) / max(len(base), 1),
                        step_ms=step_ms, notes=notes)
