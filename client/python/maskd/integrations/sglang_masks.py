"""SGLang's vocab mask for the maskd grammar backend: an int32 tensor of
(batch, ceil(vocab_size / 32)) words in XGrammar's layout (token t allowed iff bit
t & 31 of word t >> 5 is set; a row of -1 is unconstrained), which is also the layout
of maskd's Step reply. Rows are copied from the reply as they are; nothing is
unpacked in Python."""
from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np
import torch


def words_for(vocab_size: int) -> int:
    return -(-int(vocab_size) // 32)


def allocate(vocab_size: int, batch_size: int) -> torch.Tensor:
    """A fresh (batch_size, words) int32 mask on the CPU, every row -1 (unconstrained:
    SGLang leaves the rows of requests without a grammar as allocated). Pinned where
    CUDA is there, so that ``move`` is a real asynchronous copy."""
    pin = torch.cuda.is_available()
    return torch.full((batch_size, words_for(vocab_size)), -1, dtype=torch.int32,
                      pin_memory=pin)


def fill_rows(vocab_mask: torch.Tensor, rows: Sequence[int], words: np.ndarray) -> None:
    """Writes ``words`` ((len(rows), w) little-endian uint32, a Step reply's masks) into
    ``vocab_mask[rows]`` with one vectorised copy. w may be narrower than the tensor's
    rows (the columns past it are then 0: disallowed, as maskd pads)."""
    if not len(rows):
        return
    src = np.ascontiguousarray(words, dtype="<u4").view(np.int32)
    w = src.shape[1]
    index = np.asarray(rows, dtype=np.int64)
    if vocab_mask.device.type == "cpu":
        dst = vocab_mask.numpy()  # shares memory with the tensor
        if w == dst.shape[1]:
            dst[index] = src
        else:
            dst[index] = 0
            dst[index, :w] = src
        return
    full = torch.zeros((len(index), vocab_mask.shape[1]), dtype=torch.int32)
    full[:, :w] = torch.from_numpy(src)
    vocab_mask.index_copy_(0, torch.from_numpy(index).to(vocab_mask.device),
                           full.to(vocab_mask.device))


def move(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
    return vocab_mask.to(device, non_blocking=True)


_BITS: Dict[torch.device, torch.Tensor] = {}  # the 8 bit weights, per device


def _bit_weights(device: torch.device) -> torch.Tensor:
    t = _BITS.get(device)
    if t is None:
        t = _BITS[device] = torch.tensor([1 << j for j in range(8)], dtype=torch.uint8,
                                         device=device)
    return t


def apply(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
    """logits[i, t] = -inf where row i of the mask does not allow t. Vectorised: the
    constrained rows' mask bytes against the 8 bit weights give a (rows, words*32) bool
    of disallowed ids (little-endian words: token 8b+j is bit j of byte b), one
    masked_fill. Rows of -1 (unconstrained) are skipped and left as they are; in the
    others, logits wider than the mask (padding ids past it) are masked too."""
    if vocab_mask.device != logits.device:
        vocab_mask = vocab_mask.to(logits.device, non_blocking=True)
    rows = torch.nonzero((vocab_mask != -1).any(dim=1)).view(-1)
    if rows.numel() == 0:
        return
    width = logits.shape[-1]
    every = rows.numel() == logits.shape[0]
    sub = vocab_mask if every else vocab_mask.index_select(0, rows)
    as_bytes = sub.contiguous().view(torch.uint8)  # (n, words*4)
    disallowed = (as_bytes.unsqueeze(-1) & _bit_weights(logits.device)).eq(0)
    disallowed = disallowed.reshape(as_bytes.shape[0], -1)
    bits = disallowed.shape[1]
    if bits < width:  # ids past the mask: disallowed
        pad = torch.ones((disallowed.shape[0], width - bits), dtype=torch.bool,
                         device=logits.device)
        disallowed = torch.cat([disallowed, pad], dim=1)
    disallowed = disallowed[:, :width]
    if every:
        logits.masked_fill_(disallowed, float("-inf"))
    else:
        logits[rows] = logits[rows].masked_fill_(disallowed, float("-inf"))
