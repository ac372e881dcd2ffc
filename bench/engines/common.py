"""The values every engine runner of scripts/engine_e2e.sh shares: the requests it
reads, the context it hands an engine module, the result it gets back, and the
OUT.jsonl lines it writes from them.

An engine module (bench/engines/engine_<name>.py) exposes ``run(ctx) -> EngineResult``.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import socket
from typing import Any, Dict, Iterable, List, Optional, Sequence

KINDS = ("regex", "json_schema", "lark", "gbnf")
# The bundled tokenizer every tiny model uses (data/tokenizers/qwen3): maskd serves it
# under this name with no registration.
TOKENIZER = "qwen3"
# Fixed, so that runs differ only by seed, backend and batch.
PROMPT = "Answer in the requested format:"


def free_port() -> int:
    """A loopback TCP port nothing listens on now (for a server started next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass(frozen=True)
class Request:
    """One line of IN.jsonl: ``constraint`` is the regex, the schema's JSON text, or the
    grammar text (Lark or GBNF)."""
    id: str
    kind: str
    constraint: str


@dataclasses.dataclass
class E2EContext:
    engine: str
    requests: List[Request]
    maskd_addr: str          # the server maskd backends use ("unix:///...")
    backend: str             # "maskd" or "builtin"
    max_tokens: int          # the engine's max_tokens, and maskd's budget
    batch: int               # requests generated together
    seed: int
    model_dir: pathlib.Path  # the tiny model: the engine module's model_path(), else tiny_model.hf_model_dir()
    prompt: str = PROMPT
    tokenizer: str = TOKENIZER


@dataclasses.dataclass
class Sample:
    id: str
    text: str
    token_ids: List[int]
    finished: bool           # ended by the constraint (EOS / stop), not cut at max_tokens


@dataclasses.dataclass
class EngineResult:
    engine_version: str
    model: str
    samples: List[Sample]
    decode_steps: int                  # engine steps of the constrained run (all batches)
    constrained_s: float               # wall seconds of those steps
    unconstrained_ms_per_step: float   # the same model, batch and process, no constraint
    step_ms: List[float] = dataclasses.field(default_factory=list)  # per step, if measured
    notes: List[str] = dataclasses.field(default_factory=list)      # what was not run, and why


def read_requests(path: pathlib.Path) -> List[Request]:
    """IN.jsonl: one JSON object a line; blank lines skipped. Raises ValueError naming
    the line of the first bad record."""
    out: List[Request] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not JSON: {e}") from None
        if not isinstance(rec, dict) or set(rec) < {"id", "kind", "constraint"}:
            raise ValueError(f"{path}:{n}: needs the fields id, kind, constraint")
        if rec["kind"] not in KINDS:
            raise ValueError(f"{path}:{n}: kind {rec['kind']!r} is not one of {', '.join(KINDS)}")
        constraint = rec["constraint"]
        if rec["kind"] == "json_schema" and not isinstance(constraint, str):
            constraint = json.dumps(constraint)
        if not isinstance(constraint, str):
            raise ValueError(f"{path}:{n}: constraint must be a string")
        out.append(Request(str(rec["id"]), rec["kind"], constraint))
    if not out:
        raise ValueError(f"{path}: no request")
    return out


def batches(requests: Sequence[Request], batch: int) -> Iterable[List[Request]]:
    for i in range(0, len(requests), batch):
        yield list(requests[i:i + batch])


def percentile(values: Sequence[float], q: float) -> Optional[float]:
    """Nearest-rank percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100 * len(s) + 0.5)) - 1))
    return s[k]


def output_lines(ctx: E2EContext, res: EngineResult,
                 checks: Sequence[Optional[bool]]) -> List[Dict[str, Any]]:
    """The OUT.jsonl records: one per sample, then the summary."""
    lines: List[Dict[str, Any]] = []
    for s, ok in zip(res.samples, checks):
        lines.append({"id": s.id, "engine": ctx.engine, "engine_version": res.engine_version,
                      "backend": ctx.backend, "text": s.text, "token_ids": s.token_ids,
                      "finished": s.finished, "valid": ok})
    generated = sum(len(s.token_ids) for s in res.samples)
    steps = max(res.decode_steps, 1)
    lines.append({
        "summary": True, "engine": ctx.engine, "engine_version": res.engine_version,
        "backend": ctx.backend, "model": res.model, "requests": len(res.samples),
        "generated_tokens": generated, "batch": ctx.batch, "seed": ctx.seed,
        "max_tokens": ctx.max_tokens, "decode_steps": res.decode_steps,
        "ms_per_step": 1000.0 * res.constrained_s / steps,
        "unconstrained_ms_per_step": res.unconstrained_ms_per_step,
        "p50_step_ms": percentile(res.step_ms, 50), "p99_step_ms": percentile(res.step_ms, 99),
        "max_step_ms": max(res.step_ms) if res.step_ms else None,
        "finished": sum(s.finished for s in res.samples),
        "violations": sum(1 for ok in checks if ok is False),
        "unchecked": sum(1 for ok in checks if ok is None),
        "notes": res.notes,
    })
    return lines
