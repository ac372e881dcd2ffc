"""Markdown for bench/engines/bench_engines.sh's JSON lines: per engine, constraint kind and
batch size, ms per decode step unconstrained, with the engine's built-in backend and with
maskd, what each adds over unconstrained, the p99 step (where the engine's API lets the
runner time single steps), and the outputs an independent matcher rejected / requests (a
built-in "backend" that is none, transformers' and mlx-lm's, generates unconstrained).

    python3 bench/tables/engines.py OUT.jsonl
"""
from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Optional, Tuple

from common import open_input, table


def ms(v: Optional[float]) -> str:
    return "–" if v is None else f"{v:.2f}"


def main(path: str) -> None:
    runs: Dict[Tuple[str, str, int], Dict[str, Dict[str, Any]]] = {}
    order: List[Tuple[str, str, int]] = []
    with open_input(path) as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)
            key = (d["engine"], d["kind"], int(d["batch"]))
            if key not in runs:
                runs[key] = {}
                order.append(key)
            runs[key][d["backend"]] = d
    rows = []
    notes: List[str] = []
    for key in order:
        engine, kind, batch = key
        b, m = runs[key].get("builtin", {}), runs[key].get("maskd", {})
        base = m.get("unconstrained_ms_per_step") or b.get("unconstrained_ms_per_step")

        def added(d: Dict[str, Any]) -> Optional[float]:
            if "ms_per_step" not in d or base is None:
                return None
            return d["ms_per_step"] - base

        def cell(d: Dict[str, Any]) -> str:
            if "error" in d:
                notes.append(f"{engine} {kind} batch {batch} {d['backend']}: "
                             f"{d['error'].strip().splitlines()[-1][:200]}")
                return "failed"
            return ms(d.get("ms_per_step"))

        version = m.get("engine_version") or b.get("engine_version") or ""
        name = version if version.startswith(engine) or engine in version else \
            f"{engine} {version}".strip()

        def viol(d: Dict[str, Any]) -> str:
            return "–" if "violations" not in d else f"{d['violations']} / {d['requests']}"

        rows.append([name, kind, str(batch), ms(base), cell(b), ms(added(b)),
                     cell(m), ms(added(m)), ms(b.get("p99_step_ms")), ms(m.get("p99_step_ms")),
                     viol(b), viol(m)])
        for d in (b, m):
            for n in d.get("notes", []) or []:
                line = f"{engine} {d.get('backend')}: {n}"
                if line not in notes:
                    notes.append(line)
    header = ["engine", "constraint", "batch", "unconstrained ms/step", "built-in ms/step",
              "built-in adds", "maskd ms/step", "maskd adds", "built-in p99 step ms",
              "maskd p99 step ms", "built-in violations", "maskd violations"]
    print(table(header, [False] * 3 + [True] * 9, rows), end="")
    if notes:
        print()
        for n in notes:
            print(f"- {n}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "-")
