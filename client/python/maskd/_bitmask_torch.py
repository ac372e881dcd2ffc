"""Packed mask rows applied to torch logits in place, straight from the words.

``WordsApplier().apply_(logits, words)``: ``logits`` (rows, width) float16, bfloat16,
float32 or float64 on any device; ``words`` (rows, n) int32 on the same device, n even and
≥ ceil(width / 32). Token t of row r keeps its logit iff bit t & 31 of ``words[r, t >> 5]``
is set (little-endian words: maskd's reply layout); every other logit becomes -inf,
whatever it was (NaN included). That is ``masked_fill_``'s result, bit for bit: kept
logits keep their exact bits (NaN payloads and -0.0 included), since both paths below
work on the logits' integer lanes, never through float arithmetic. The callers encode
the adapters' rules in the words (maskd.integrations._row_masks.PackedRows): padding ids
(past the reply's 32·words_per_row) read zero words, rows to leave alone all ones.

Two implementations, the same bits out:

* compiled (CPU): one fused loop (torch.compile, inductor's C++ backend, the kernel
  llguidance's torch apply compiles, here on the integer lanes): each logit reads its
  bit and is written once. Compiled on first use per dtype, and once more for one row
  against several (seconds each; inductor caches the code on disk). If that fails (no C++ compiler) the eager path is used from then on, with
  one warning; ``MASKD_TORCH_COMPILE=0`` in the environment skips it.
* eager (any device): per chunk of rows, in a buffer reused across calls (no bool array,
  no ``masked_fill_``), five elementwise integer passes over lanes of L bits:
  d = (~lane << (L-1-s)) >> (L-1) (arithmetic shift: all ones where token s's bit is
  clear, 0 where set); x |= d; d &= ~bits(-inf); x ^= d (all ones xor the mantissa is
  -inf's bit pattern; x | 0 ^ 0 is x).
"""
from __future__ import annotations

import os
import warnings
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import numpy as np
import torch


class _Spec(NamedTuple):
    lane: torch.dtype  # the integer type of the float's width
    bits: int          # its width in bits
    ninf: int          # -inf's bit pattern as a lane value (negative: the sign bit is set)


_SPECS: Dict[torch.dtype, _Spec] = {}
_LANES = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _spec(dtype: torch.dtype) -> _Spec:
    s = _SPECS.get(dtype)
    if s is None:
        if not dtype.is_floating_point or dtype.itemsize not in _LANES:
            raise ValueError(f"apply: logits must be float16, bfloat16, float32 or float64, not {dtype}")
        lane = _LANES[dtype.itemsize]
        ninf = int(torch.tensor(float("-inf"), dtype=dtype).view(lane).item())
        s = _SPECS[dtype] = _Spec(lane, 8 * dtype.itemsize, ninf)
    return s


# The eager path's chunk on the CPU: rows of at most this many bytes of logits (and as
# many of its buffer) per pass, so that both stay in cache across the five passes.
_CPU_CHUNK_BYTES = 1 << 21

_Kernel = Callable[[torch.Tensor, torch.Tensor, int], None]


def _kernel(lanes: torch.Tensor, words: torch.Tensor, ninf: int) -> None:
    """What torch.compile fuses: the bits of the int32 ``words`` select ``ninf`` in the
    logits' integer ``lanes`` where a token's bit is clear."""
    shifts = torch.arange(32, dtype=torch.int32, device=words.device)
    bits = ((words.unsqueeze(-1) >> shifts) & 1).view(words.shape[0], -1)[:, : lanes.shape[1]]
    lanes.masked_fill_(bits == 0, ninf)


_compiled: Optional[_Kernel] = None
_compile_failed = False


def _compiled_kernel() -> Optional[_Kernel]:
    """The compiled kernel (built lazily: torch.compile compiles on its first call), or None
    where it is switched off (MASKD_TORCH_COMPILE=0) or failed in this process."""
    global _compiled
    if _compile_failed or os.environ.get("MASKD_TORCH_COMPILE", "1").strip().lower() in (
            "0", "false", "no", "off"):
        return None
    if _compiled is None:
        _compiled = torch.compile(_kernel, dynamic=True)
    return _compiled


class WordsApplier:
    """``apply_(logits, words)`` (module doc). ``use_compiled=False``: the eager path only.

    Holds the eager path's buffers, reallocated only when (rows, chunk, lanes per row,
    dtype, device) change."""

    def __init__(self, use_compiled: bool = True) -> None:
        # The compiled kernel for CPU logits (None: eager only), resolved once per applier.
        self._kernel = _compiled_kernel() if use_compiled else None
        self._key: Optional[Tuple[int, int, int, torch.dtype, torch.device]] = None
        self._inv = torch.empty(0, dtype=torch.int32)  # ~words as lanes: (rows, lanes)
        self._buf = torch.empty(0, dtype=torch.int32)  # d: (chunk, lanes, bits)
        self._shifts = torch.empty(0, dtype=torch.int32)  # bits-1-s for s = 0..bits-1

    def apply_(self, logits: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """Masks ``logits`` in place; returns it."""
        global _compile_failed
        spec = _SPECS.get(logits.dtype) or _spec(logits.dtype)
        if (logits.dim() != 2 or words.shape[0] != logits.shape[0] or words.dtype != torch.int32
                or words.shape[1] % 2 or 32 * words.shape[1] < logits.shape[1]):
            raise ValueError(f"apply: logits {tuple(logits.shape)} and int32 words "
                             f"{tuple(words.shape)} {words.dtype}: need (rows, width) and "
                             "(rows, n), n even and ≥ ceil(width / 32)")
        if self._kernel is not None and logits.device.type == "cpu":
            if not _compile_failed:
                try:
                    self._kernel(logits.view(spec.lane), words, spec.ninf)
                    return logits
                except Exception as e:  # noqa: BLE001: no C++ compiler, an unsupported platform
                    _compile_failed = True
                    warnings.warn(f"maskd: torch.compile of the mask apply failed "
                                  f"({type(e).__name__}: {e}); using the eager apply",
                                  RuntimeWarning, stacklevel=2)
            self._kernel = None
        self._eager(logits, words, spec)
        return logits

    def _eager(self, logits: torch.Tensor, words: torch.Tensor, spec: _Spec) -> None:
        rows, width = logits.shape
        if not rows or not width:
            return
        lanes = words.view(spec.lane)  # (rows, per_row): a row's words as lanes of L bits
        per_row = lanes.shape[1]
        chunk = rows
        if logits.device.type == "cpu":
            chunk = max(1, min(rows, _CPU_CHUNK_BYTES // (per_row * spec.bits * spec.bits // 8)))
        key = (rows, chunk, per_row, spec.lane, logits.device)
        if self._key != key:
            self._inv = torch.empty((rows, per_row), dtype=spec.lane, device=logits.device)
            self._buf = torch.empty((chunk, per_row, spec.bits), dtype=spec.lane, device=logits.device)
            self._shifts = torch.arange(spec.bits - 1, -1, -1, dtype=spec.lane, device=logits.device)
            self._key = key
        inv = torch.bitwise_not(lanes, out=self._inv)  # bit set: the token is masked
        x = logits.view(spec.lane)
        mantissa = ~spec.ninf
        for a in range(0, rows, chunk):
            n = min(chunk, rows - a)
            d = self._buf[:n]
            torch.bitwise_left_shift(inv[a:a + n].unsqueeze(-1), self._shifts, out=d)
            d.bitwise_right_shift_(spec.bits - 1)  # all ones where the token is masked, else 0
            dv = d.view(n, -1)[:, :width]
            xa = x[a:a + n]
            xa.bitwise_or_(dv)
            dv.bitwise_and_(mantissa)
            xa.bitwise_xor_(dv)


def as_words(words: np.ndarray) -> torch.Tensor:
    """A C-contiguous NumPy uint32 (rows, n) array as the int32 tensor ``apply_`` takes,
    sharing its memory."""
    return torch.from_numpy(words.view(np.int32))
