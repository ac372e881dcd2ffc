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
    return np.flatnonzero(unpack_mask(mask, 32 * mask.shape[-1])).tolist()


def is_allowed(mask: np.ndarray, token: int) -> bool:
    """Whether ``token`` is allowed by one packed row."""
    w = token >> 5
    return w < mask.shape[-1] and bool((int(mask[w]) >> (token & 31)) & 1)


def apply_mask(logits: Any, mask: np.ndarray) -> Any:
    """Applies packed mask rows to logits.

    ``logits``: a NumPy array, a torch CPU tensor or an MLX array, shape (V,) or
    (B, V); ``mask``: uint32 words, shape (W,) or (B, W) (a (B, W) mask for (B, V)
    logits; one row broadcasts). NumPy arrays and torch tensors are changed in
    place and returned; MLX arrays are immutable, so a new array is returned.
    """
    mask = np.asarray(mask)
    if mask.dtype != np.uint32:
        mask = mask.astype(np.uint32)
    mod = type(logits).__module__
    if not (isinstance(logits, np.ndarray) or mod.startswith(("torch", "mlx"))):
        raise TypeError(f"apply_mask: unsupported logits type {type(logits).__name__} "
                        "(NumPy array, torch tensor or MLX array)")
    width = logits.shape[-1]
    allowed = unpack_mask(mask, width)
    if isinstance(logits, np.ndarray):
        np.putmask(logits, ~np.broadcast_to(allowed, logits.shape), -np.inf)
        return logits
    if mod.startswith("torch"):
        import torch

        if logits.device.type != "cpu":
            allowed_t = torch.from_numpy(allowed).to(logits.device, non_blocking=True)
        else:
            allowed_t = torch.from_numpy(allowed)
        logits.masked_fill_(~allowed_t, float("-inf"))
        return logits
    if mod.startswith("mlx"):
        import mlx.core as mx

        return mx.where(mx.array(allowed), logits, mx.array(float("-inf"), dtype=logits.dtype))
