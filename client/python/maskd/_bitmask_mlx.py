"""Packed mask rows applied to MLX logits, straight from the words.

``apply_words(logits, words)``: ``logits`` (rows, width) of a floating dtype; ``words``
(rows, n) uint32 in maskd's layout (token t kept iff bit t & 31 of word t >> 5 is set),
n ≥ ceil(width / 32) (callers pad: zero words mask padding ids). Returns a new array (MLX
arrays are immutable): ``mx.where`` of the bits, so kept logits are selected, not
computed (their bits are unchanged), the others are -inf. Nothing is unpacked in NumPy:
the bits are expanded by MLX ops, fused by ``mx.compile`` into one kernel when that works
here (probed once on a small input, since a compiled MLX graph fails only when it is
evaluated, which happens inside the engine); otherwise the same ops run unfused.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import mlx.core as mx
import numpy as np

_SHIFTS = mx.arange(32, dtype=mx.uint32)
_NINF: Dict[Any, mx.array] = {}


def _select(words: mx.array, logits: mx.array, ninf: mx.array) -> mx.array:
    bits = ((words[:, :, None] >> _SHIFTS) & 1).reshape(words.shape[0], -1)[:, : logits.shape[-1]]
    return mx.where(bits.astype(mx.bool_), logits, ninf)


_fused: Optional[Callable[[mx.array, mx.array, mx.array], mx.array]] = None
_probed = False


def _kernel() -> Callable[[mx.array, mx.array, mx.array], mx.array]:
    """``mx.compile(_select)`` if it compiles and evaluates here, else ``_select``."""
    global _fused, _probed
    if not _probed:
        _probed = True
        try:
            fused = mx.compile(_select)
            w = mx.array(np.array([[0x5, 0]], dtype=np.uint32))
            got = fused(w, mx.zeros((1, 40)), mx.array(-np.inf, dtype=mx.float32))
            mx.eval(got)
            want = np.full((1, 40), -np.inf, np.float32)
            want[0, [0, 2]] = 0
            if np.array_equal(np.array(got), want):
                _fused = fused
        except Exception:  # noqa: BLE001: no JIT compiler here: the unfused ops
            _fused = None
    return _fused if _fused is not None else _select


def apply_words(logits: mx.array, words: np.ndarray, fused: bool = True) -> mx.array:
    """The masked logits (module doc); ``fused=False``: the unfused ops (the fallback)."""
    ninf = _NINF.get(logits.dtype)
    if ninf is None:
        ninf = _NINF[logits.dtype] = mx.array(-np.inf, dtype=logits.dtype)
    return (_kernel() if fused else _select)(mx.array(words), logits, ninf)
