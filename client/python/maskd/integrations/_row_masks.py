"""A batch's Step reply laid out for the logits of every row of the batch, in buffers
allocated once per shape and reused every step:

* ``PackedRows``: (rows, n) packed words, what the vectorised applies take
  (maskd._bitmask_torch, the MLX apply): nothing is unpacked here;
* ``DisallowedRows``: a (rows, width) bool array of disallowed tokens (for NumPy logits).

Both encode the same rules: row ``live[j]`` gets reply row ``masks[j]``; ids at or past
32 × words_per_row (padding ids of logits wider than the mask) are masked; rows not in
``live`` are left alone."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from maskd.masks import padded_words

# _DISALLOWED[b]: the 8 tokens of mask byte b as 8 bools packed in one uint64 (memory
# order: token 8k+j at byte j), True where bit j of b is clear. Indexing it with a row's
# mask bytes unpacks the row without temporaries.
_DISALLOWED = (1 - np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1,
                                 bitorder="little")).view(np.uint64).reshape(256)


class PackedRows:
    """``rows(masks, live, rows, width)``: (rows, padded_words(width)) uint32.

    Row ``live[j]`` holds reply row ``masks[j]`` (its first words, as many as fit), then
    zero words (padding ids: masked); rows not in ``live`` are all ones (every token
    allowed: their logits are left as they are). The array returned is a buffer that the
    next call overwrites, reallocated only when (rows, width) changes.
    """

    def __init__(self) -> None:
        self._buf = np.zeros((0, 0), np.uint32)

    def rows(self, masks: np.ndarray, live: Sequence[int], rows: int, width: int) -> np.ndarray:
        """masks: (len(live), words_per_row) uint32, the reply's rows (little-endian words)."""
        words = padded_words(width)
        if self._buf.shape != (rows, words):
            self._buf = np.empty((rows, words), np.uint32)
        buf = self._buf
        n = len(live)
        if n == rows and list(live) == list(range(rows)):
            at: Any = slice(None)  # every row live, in order (the usual step)
        else:
            buf.fill(0xFFFFFFFF)
            at = np.asarray(live, dtype=np.intp)
        if n:
            src = np.asarray(masks, dtype="<u4")
            w = min(src.shape[-1], words)
            buf[at, :w] = src[:, :w]
            buf[at, w:] = 0
        return buf


class DisallowedRows:
    """``rows(masks, live, rows, width)``: (rows, width) bool, True where a token is masked.

    Row ``live[j]`` gets reply row ``masks[j]``: True for the tokens it does not allow and
    for ids at or past 32 × words_per_row (padding ids of logits wider than the mask).
    Rows not in ``live`` are all False (their logits are left alone). The array returned
    is a view of a buffer that the next call overwrites; the buffers are reallocated only
    when (rows, width, words_per_row) changes.
    """

    def __init__(self) -> None:
        self._shape: Optional[Tuple[int, int, int]] = None
        self._out = np.zeros((0, 0), np.bool_)
        self._words = np.zeros((0, 0), np.uint64)
        self._index = np.zeros((0, 0), np.intp)
        self._blank = np.zeros(0, np.bool_)  # rows now all False

    def _allocate(self, rows: int, width: int, words: int) -> None:
        bits = 32 * words
        # A multiple of 8 (rows stay uint64-aligned); equal to width for the usual logits
        # widths (multiples of 8, at least 32·words), so that the view returned is contiguous.
        cols = max(bits, -(-width // 8) * 8)
        self._out = np.ones((rows, cols), np.bool_)  # ids past the mask: disallowed
        # Row i's first `bits` bools as 4·words uint64 (8 tokens each), contiguous per row.
        self._words = self._out.view(np.uint64)[:, :bits // 8]
        self._index = np.empty((rows, 4 * words), np.intp)
        self._blank = np.zeros(rows, np.bool_)
        self._shape = (rows, width, words)

    def rows(self, masks: np.ndarray, live: Sequence[int], rows: int, width: int) -> np.ndarray:
        """masks: (len(live), words_per_row) uint32, the reply's rows (little-endian words)."""
        words = masks.shape[-1] if len(live) else (self._shape[2] if self._shape else 0)
        if self._shape != (rows, width, words):
            self._allocate(rows, width, words)
        out = self._out
        n = len(live)
        if n:
            data = np.ascontiguousarray(masks, dtype="<u4").view(np.uint8)  # no copy for a reply
            np.copyto(self._index[:n], data, casting="unsafe")
            for j, i in enumerate(live):
                if self._blank[i]:
                    out[i].fill(True)
                    self._blank[i] = False
                np.take(_DISALLOWED, self._index[j], out=self._words[i], mode="wrap")
        if n < rows:
            is_live = np.zeros(rows, np.bool_)
            is_live[list(live)] = True
            for r in np.flatnonzero(~is_live & ~self._blank):
                out[r].fill(False)
                self._blank[r] = True
        return out[:, :width]
