"""SGLang's vocab mask for the maskd grammar backend: an int32 tensor of
(batch, ceil(vocab_size / 32)) words in XGrammar's layout (token t allowed iff bit
t & 31 of word t >> 5 is set; a row of -1 is unconstrained), which is also the layout
of maskd's Step reply. Rows are copied from the reply as they are; nothing is
unpacked in Python."""
from __future__ import annotations

from typing import Any, Sequence

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


_BITS: dict = {}


def _bit_weights(device: torch.device) -> torch.Tensor:
    t = _BITS.get(device)
    if t is None:
        t = _BITS[device] = torch.tensor([1 << j for j in range(8)], dtype=torch.uint8,
                                         device=device)
    return t


def apply(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
    """logits[i, t] = -inf where row i of the mask does not allow t. One vectorised
    pass: the mask's bytes against the 8 bit weights give a (rows, words*32) bool
    (little-endian words: token 8b+j is bit j of byte b). Logits wider than the mask
    (padding ids past it) are masked too; rows of -1 stay as they are."""
    if vocab_mask.device != logits.device:
        vocab_mask = vocab_mask.to(logits.device, non_blocking=True)
    rows, width = logits.shape[0], logits.shape[-1]
    as_bytes = vocab_mask.contiguous().view(torch.uint8)  # (rows, words*4)
    allowed = (as_bytes.unsqueeze(-1) & _bit_weights(logits.device)).ne(0).reshape(rows, -1)
    bits = allowed.shape[1]
    if bits >= width:
        logits.masked_fill_(~allowed[:, :width], float("-inf"))
    else:
        logits[:, :bits].masked_fill_(~allowed, float("-inf"))
        logits[:, bits:] = float("-inf")
