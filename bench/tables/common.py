"""What every table generator in bench/tables/ shares: reading Google Benchmark
JSON (`--benchmark_format=json` or `--benchmark_out`), reading JSON lines, and
printing Markdown tables.

Each generator reads one benchmark's output (a file argument, or stdin for
"-") and prints Markdown only; scripts/bench_docs.sh runs the benchmark,
stamps the result (command, commit, date, load) and puts it between the
generator's markers in docs/benchmarks.md.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import IO, Callable, Iterable, Sequence

# Google Benchmark keys that are not user counters.
_NON_COUNTERS = {
    "name", "run_name", "run_type", "family_index", "per_family_instance_index", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit", "label",
    "aggregate_name", "aggregate_unit", "error_occurred", "error_message",
}
_NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


@dataclass(frozen=True)
class Run:
    """One benchmark's figures: its median over repetitions when it was repeated
    (the "median" aggregate), else its only run. Times in nanoseconds."""

    name: str  # run_name, e.g. "BM_Apply/0/1/2/real_time"
    real_ns: float
    cpu_ns: float
    label: str = ""
    error: str | None = None
    counters: dict[str, float] = field(default_factory=dict)

    def parts(self) -> list[str]:
        """The name split at "/", without the suffixes Google Benchmark adds
        (real_time, manual_time, iterations:N, ...)."""
        return [p for p in self.name.split("/") if p not in ("real_time", "manual_time") and ":" not in p]


def open_input(path: str) -> IO[str]:
    return sys.stdin if path == "-" else open(path, encoding="utf-8")


def load_gbench(path: str) -> tuple[dict[str, Run], dict]:
    """(runs by run_name in the order first met, the JSON's "context")."""
    with open_input(path) as f:
        doc = json.load(f)
    runs: dict[str, Run] = {}
    for b in doc.get("benchmarks", []):
        run_name = b.get("run_name", b["name"])
        aggregate = b.get("run_type") == "aggregate"
        if aggregate and b.get("aggregate_name") != "median":
            continue
        if not aggregate and run_name in runs:
            continue  # a repetition; the median aggregate (when printed) replaces it below
        scale = _NS_PER_UNIT[b.get("time_unit", "ns")]
        counters = {k: float(v) for k, v in b.items()
                    if k not in _NON_COUNTERS and isinstance(v, (int, float))}
        runs[run_name] = Run(name=run_name, real_ns=b.get("real_time", 0.0) * scale,
                             cpu_ns=b.get("cpu_time", 0.0) * scale, label=b.get("label", ""),
                             error=b.get("error_message") if b.get("error_occurred") else None,
                             counters=counters)
    return runs, doc.get("context", {})


def load_json_lines(path: str) -> list[dict]:
    """Every line of `path` that is a JSON object (other lines are skipped)."""
    with open_input(path) as f:
        return [json.loads(line) for line in f if line.lstrip().startswith("{")]


def num(x: float, digits: int = 2) -> str:
    """`digits` decimals below 100, none from 100 up (the house's table style)."""
    if x != x:  # NaN
        return "—"
    return "%.0f" % x if abs(x) >= 100 else "%.*f" % (digits, x)


def grouped(n: float) -> str:
    """An integer with thousands separators: 128,256."""
    return "{:,}".format(int(round(n)))


def table(header: Sequence[str], numeric: Sequence[bool], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table; numeric columns are right-aligned."""
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---:" if r else "---" for r in numeric) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def engine_figures(result: dict, name: str) -> dict:
    """A peer benchmark result's figures for engine `name` (bench/grammar_peers.py,
    bench/tools_bench.py), or {} when it failed or did not run."""
    e = result["engines"].get(name, {})
    return {} if "error" in e else e


def engine_cell(result: dict, name: str, get: Callable[[dict], float], digits: int = 2) -> str:
    """get(figures) of engine `name` as a cell: "—" when it did not run, "err"
    when it failed."""
    e = result["engines"].get(name)
    if e is None:
        return "—"
    if "error" in e:
        return "err"
    return num(get(e), digits)
