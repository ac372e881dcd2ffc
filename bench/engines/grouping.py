"""Batches for engines whose constrained generate call takes one constraint for all
its rows (transformers, mlx-lm): requests with the same constraint, up to `batch` at a
time, in the order of their first appearance."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from common import Request


def same_constraint_batches(requests: Sequence[Request], batch: int) -> List[List[Request]]:
    groups: Dict[Tuple[str, str], List[Request]] = {}
    for r in requests:
        groups.setdefault((r.kind, r.constraint), []).append(r)
    out: List[List[Request]] = []
    for rs in groups.values():
        out.extend(rs[i:i + batch] for i in range(0, len(rs), batch))
    return out
