"""Packed masks ↔ logits: NumPy, torch (CPU) and MLX.

Layout (README, docs/api.md): a row is W little-endian uint32 words; token t is
allowed iff bit (t & 31) of word (t >> 5) is set. ``apply_mask`` sets every
disallowed logit to -inf and keeps allowed logits' exact values; logits past
the mask's 32·W bits (a model whose logits are wider than the mask) are padding
ids and become -inf too.
"""
from __future__ import annotations

from typing import Any, List

import numpy as np


def unpack_mask(mask: np.ndarray, width: int) -> np.ndarray:
    """Boolean allowed-array of shape mask.shape[:-1] + (width,) from packed uint32 rows.

    Ids at or past 32 × words are False (padding)."""
    mask = np.ascontiguousarray(mask, dtype="<u4")
    bits = np.unpackbits(mask.view(np.uint8), axis=-1, bitorder="little").view(np.bool_)
    have = bits.shape[-1]
    if have >= width:
        return bits[..., :width]
    out = np.zeros(bits.shape[:-1] + (width,), dtype=np.bool_)
    out[..., :have] = bits
    return out


def allowed_tokens(mask: np.ndarray) -> List[int]:
    """Token ids allowed by one packed row, increasing."""
    tokens: List[int] = np.flatnonzero(unpack_mask(mask, 32 * mask.shape[-1])).tolist()
    return tokens


def is_allowed(mask: np.ndarray, token: int) -> bool:
    """Whether ``token`` is allowed by one packed row."""
    w = token >> 5
    return w < mask.shape[-1] and bool((int(mask[w]) >> (token & 31)) & 1)


def padded_words(width: int) -> int:
    """Words per row that cover logits ``width`` wide for the vectorised applies:
    ceil(width / 64)·2 (even, so that a row also reads as 16- and 64-bit lanes)."""
    return 2 * (-(-int(width) // 64))


def pad_rows(mask: np.ndarray, width: int, rows: int) -> np.ndarray:
    """(rows, padded_words(width)) uint32: each row of ``mask`` ((W,) or (R, W); one row
    broadcasts to ``rows``), cut or padded with zero words (padding ids: disallowed)."""
    m = np.asarray(mask, dtype="<u4")
    m = m.reshape(-1, m.shape[-1])
    if m.shape[0] not in (1, rows):
        raise ValueError(f"apply_mask: {m.shape[0]} mask rows for {rows} logits rows")
    out = np.zeros((rows, padded_words(width)), np.uint32)
    w = min(m.shape[-1], out.shape[1])
    out[:, :w] = m[:, :w]
    return out


# NumPy float width (bytes) -> its integer lane type, for the bitwise apply.
_NP_LANES = {2: (np.int16, np.uint16), 4: (np.int32, np.uint32), 8: (np.int64, np.uint64)}


def _apply_numpy(logits: np.ndarray, words: np.ndarray) -> None:
    """In place on (rows, width) float16/32/64 logits, bitwise on their integer lanes (the
    eager path of maskd._bitmask_torch): d = all ones where a token is masked, then
    x |= d; d &= ~bits(-inf); x ^= d. Kept logits keep their exact bits."""
    if logits.dtype.itemsize not in _NP_LANES or logits.dtype.kind != "f":
        raise TypeError(f"apply_mask: logits must be float16, float32 or float64, not {logits.dtype}")
    signed, unsigned = _NP_LANES[logits.dtype.itemsize]
    bits = 8 * logits.dtype.itemsize
    rows, width = logits.shape
    inv = ~np.ascontiguousarray(words).view(unsigned)  # bit set: the token is masked
    shifts = np.arange(bits - 1, -1, -1, dtype=unsigned)
    # Token s of a lane → the sign bit (unsigned: no overflow), then an arithmetic shift.
    d = (inv[:, :, None] << shifts).view(signed) >> (bits - 1)
    d = d.reshape(rows, -1)[:, :width]
    x = logits.view(signed)
    ninf = int(np.array(-np.inf, logits.dtype).view(signed))
    x |= d
    d &= ~ninf
    x ^= d


def apply_mask(logits: Any, mask: np.ndarray) -> Any:
    """Applies packed mask rows to logits.

    ``logits``: a NumPy array, a torch tensor or an MLX array, shape (V,) or
    (B, V); ``mask``: uint32 words, shape (W,) or (B, W) (a (B, W) mask for (B, V)
    logits; one row broadcasts). NumPy arrays and torch tensors are changed in
    place and returned; MLX arrays are immutable, so a new array is returned.
    The packed words are applied directly (no bool array of the logits' size):
    bitwise on the logits' integer lanes for NumPy and torch (maskd._bitmask_torch),
    ``mx.where`` of the bits expanded by MLX ops for MLX; the result is
    ``masked_fill``'s, bit for bit.
    """
    mod = type(logits).__module__
    if not (isinstance(logits, np.ndarray) or mod.startswith(("torch", "mlx"))):
        raise TypeError(f"apply_mask: unsupported logits type {type(logits).__name__} "
                        "(NumPy array, torch tensor or MLX array)")
    shape = tuple(logits.shape)
    if len(shape) not in (1, 2):
        raise ValueError(f"apply_mask: logits must be (V,) or (B, V), not {shape}")
    rows, width = (1, shape[0]) if len(shape) == 1 else shape
    words = pad_rows(mask, width, rows)
    if isinstance(logits, np.ndarray):
        _apply_numpy(logits[None] if logits.ndim == 1 else logits, words)  # views: in place
        return logits
    if mod.startswith("torch"):
        from maskd._bitmask_torch import WordsApplier, as_words

        w = as_words(words)
        if logits.device.type != "cpu":
            w = w.to(logits.device)
        WordsApplier().apply_(logits.unsqueeze(0) if logits.dim() == 1 else logits, w)
        return logits
    from maskd._bitmask_mlx import apply_words

    return apply_words(logits.reshape(rows, width), words).reshape(shape)
