"""The vectorised packed-mask applies against a brute-force per-token reference, bit for bit.

Random packed rows of words that are all zero, all ones or random; logits narrower than,
as wide as and wider than 32 × words (padding ids), widths that are not multiples of 32;
rows not live; float32, bfloat16, float16 (and float64 where the library has it); logits
holding NaN, ±inf and -0.0 at kept and at masked positions. Paths: maskd._bitmask_torch
(compiled and eager), the transformers processor's per-step path (PackedRows + the
apply), maskd.apply_mask on NumPy, torch and MLX, maskd._bitmask_mlx.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import pytest

import maskd
from conftest import need

# (rows, words per mask row, logits width)
SHAPES = [(1, 1, 1), (1, 1, 31), (2, 1, 33), (3, 3, 96), (3, 3, 100), (2, 3, 70), (4, 5, 77),
          (1, 2, 64), (3, 1, 200), (2, 4740, 151936)]


def _masks(rng: np.random.Generator, n: int, words: int) -> np.ndarray:
    m = rng.integers(0, 2**32, size=(n, words), dtype=np.uint32)
    kind = rng.integers(0, 4, size=(n, words))
    m[kind == 0] = 0            # whole words masked
    m[kind == 1] = 0xFFFFFFFF   # whole words kept
    return m


def _special(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """NaN, +inf, -inf and -0.0 at random positions of float32 logits."""
    flat = x.reshape(-1)
    for v in (np.nan, np.inf, -np.inf, -0.0):
        flat[rng.integers(0, flat.size, size=max(1, flat.size // 16))] = v
    return x


def reference(logits_bits: np.ndarray, ninf_bits: int, masks: np.ndarray,
              live: Sequence[int]) -> np.ndarray:
    """The masked logits' bits, token by token: row live[j], token t keeps its bits iff
    t >> 5 < words and bit t & 31 of masks[j, t >> 5] is set; else -inf's bits. Other rows
    as they were."""
    out = logits_bits.copy()
    words = masks.shape[-1]
    for j, i in enumerate(live):
        for t in range(out.shape[1]):
            w = t >> 5
            if not (w < words and (int(masks[j, w]) >> (t & 31)) & 1):
                out[i, t] = ninf_bits
    return out


def reference_fast(logits_bits: np.ndarray, ninf_bits: int, masks: np.ndarray,
                   live: Sequence[int]) -> np.ndarray:
    """``reference`` with the per-token test vectorised over t (for 151,936-wide rows)."""
    out = logits_bits.copy()
    t = np.arange(out.shape[1])
    w = t >> 5
    inside = w < masks.shape[-1]
    for j, i in enumerate(live):
        word = np.zeros(t.size, np.uint64)
        word[inside] = masks[j, w[inside]]
        keep = ((word >> (t & 31).astype(np.uint64)) & 1).astype(bool)
        out[i, ~keep] = ninf_bits
    return out


def _cases(seed: int) -> List[Tuple[int, int, int, List[int], np.ndarray, np.ndarray]]:
    """(rows, words, width, live, masks, float32 logits) for every shape."""
    rng = np.random.default_rng(seed)
    out = []
    for rows, words, width in SHAPES:
        for live in ([*range(rows)], sorted(rng.choice(rows, size=int(rng.integers(0, rows + 1)),
                                                      replace=False).tolist())):
            masks = _masks(rng, len(live), words)
            x = _special(rng.standard_normal((rows, width)).astype(np.float32), rng)
            out.append((rows, words, width, live, masks, x))
    return out


def _want(x_bits: np.ndarray, ninf_bits: int, masks: np.ndarray, live: Sequence[int]) -> np.ndarray:
    if x_bits.shape[1] > 1000:
        return reference_fast(x_bits, ninf_bits, masks, live)
    return reference(x_bits, ninf_bits, masks, live)


def test_references_agree():
    """The vectorised reference (used for the wide rows) against the per-token loop."""
    for rows, words, width, live, masks, x in _cases(0):
        if width > 1000:
            x, masks = x[:, :3000], masks[:, :90]
        bits = x.view(np.int32)
        assert np.array_equal(reference(bits, -8388608, masks, live),
                              reference_fast(bits, -8388608, masks, live))


# -- torch --------------------------------------------------------------------------

def _torch_dtypes():
    torch = need("torch")
    return torch, [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def _lane(torch, dtype):
    return {2: torch.int16, 4: torch.int32, 8: torch.int64}[dtype.itemsize]


def _torch_want(torch, t, masks, live):
    lane = _lane(torch, t.dtype)
    ninf = int(torch.tensor(float("-inf"), dtype=t.dtype).view(lane).item())
    return _want(t.view(lane).numpy(), ninf, masks, live)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "eager"])
def test_torch_words_applier_matches_reference(compiled):
    torch, dtypes = _torch_dtypes()
    from maskd._bitmask_torch import WordsApplier, as_words
    from maskd.integrations._row_masks import PackedRows

    applier, packed = WordsApplier(use_compiled=compiled), PackedRows()
    for dtype in dtypes:
        for rows, words, width, live, masks, x in _cases(1):
            t = torch.from_numpy(x).to(dtype)
            want = _torch_want(torch, t, masks, live)
            got = applier.apply_(t, as_words(packed.rows(masks, live, rows, width)))
            assert got is t
            assert np.array_equal(t.view(_lane(torch, dtype)).numpy(), want), (dtype, rows, words,
                                                                               width, live)


def test_torch_eager_on_non_contiguous_rows():
    """A row stride larger than the width (a slice of wider logits) and a transposed view."""
    torch, _ = _torch_dtypes()
    from maskd._bitmask_torch import WordsApplier, as_words
    from maskd.integrations._row_masks import PackedRows

    rng = np.random.default_rng(5)
    masks = _masks(rng, 3, 4)
    base = torch.from_numpy(_special(rng.standard_normal((3, 150)).astype(np.float32), rng))
    for compiled in (True, False):
        t = base.clone()
        view = t[:, :100]
        want = _torch_want(torch, view.contiguous(), masks, [0, 1, 2])
        WordsApplier(compiled).apply_(view, as_words(PackedRows().rows(masks, [0, 1, 2], 3, 100)))
        assert np.array_equal(view.contiguous().view(torch.int32).numpy(), want)
        assert torch.equal(t[:, 100:].view(torch.int32), base[:, 100:].view(torch.int32))
        tt = base.clone().t().contiguous().t()  # column-major: stride(1) != 1
        want = _torch_want(torch, tt.contiguous(), masks, [0, 1, 2])
        WordsApplier(compiled).apply_(tt, as_words(PackedRows().rows(masks, [0, 1, 2], 3, 150)))
        assert np.array_equal(tt.contiguous().view(torch.int32).numpy(), want)


class _ReplaySessions:
    """What MaskdLogitsProcessor uses of RowSessions, answering from a script."""

    def __init__(self, script):
        self.script, self.done = list(script), [False]

    def step(self, tokens):
        masks, live = self.script.pop(0)
        return maskd.StepReply([None] * len(live), masks, masks.shape[-1]), live

    def close(self):
        pass


def test_transformers_processor_matches_reference():
    """The processor's per-step path (buffers reused across steps, shapes changing)."""
    torch, dtypes = _torch_dtypes()
    need("transformers")
    from maskd.integrations.transformers import MaskdLogitsProcessor

    proc = MaskdLogitsProcessor("unix:///nonexistent.sock", "qwen3", index_id="stub",
                                eos_token_id=[0])  # no call reaches a server
    for dtype in dtypes:
        cases = _cases(2)
        for rows, words, width, live, masks, x in cases:
            proc.sessions = _ReplaySessions([(masks, live)])
            ids = torch.zeros((rows, 2), dtype=torch.long)
            proc._prev = ids[:, :1]
            scores = torch.from_numpy(x).to(dtype)
            want = _torch_want(torch, scores, masks, live)
            assert proc(ids, scores) is scores
            assert np.array_equal(scores.view(_lane(torch, dtype)).numpy(), want), (dtype, rows, width)


def test_apply_mask_numpy_and_torch_match_reference():
    torch, dtypes = _torch_dtypes()
    for rows, words, width, live, masks, x in _cases(3):
        if len(live) != rows:
            continue  # apply_mask masks every row
        for np_dtype in (np.float32, np.float16, np.float64):
            a = x.astype(np_dtype)
            lane = {2: np.int16, 4: np.int32, 8: np.int64}[a.itemsize]
            want = _want(a.view(lane), int(np.array(-np.inf, np_dtype).view(lane)), masks, live)
            assert maskd.apply_mask(a, masks) is a
            assert np.array_equal(a.view(lane), want), (np_dtype, rows, width)
        for dtype in dtypes:
            t = torch.from_numpy(x).to(dtype)
            want = _torch_want(torch, t, masks, live)
            assert maskd.apply_mask(t, masks) is t
            assert np.array_equal(t.view(_lane(torch, dtype)).numpy(), want), (dtype, rows, width)
    # 1-D logits and one row broadcast over a batch.
    rng = np.random.default_rng(4)
    row = _masks(rng, 1, 3)
    x = _special(rng.standard_normal((3, 90)).astype(np.float32), rng)
    want = reference(x.view(np.int32), -8388608, np.repeat(row, 3, axis=0), [0, 1, 2])
    one = x[1].copy()
    maskd.apply_mask(one, row[0])
    assert np.array_equal(one.view(np.int32), want[1])
    b = x.copy()
    maskd.apply_mask(b, row)
    assert np.array_equal(b.view(np.int32), want)
    t = torch.from_numpy(x.copy())
    maskd.apply_mask(t, row[0])
    assert np.array_equal(t.view(torch.int32).numpy(), want)


# -- MLX ------------------------------------------------------------------------------

@pytest.mark.parametrize("fused", [True, False], ids=["mx.compile", "unfused"])
def test_mlx_matches_reference(fused):
    mx = need("mlx.core")
    from maskd import _bitmask_mlx
    from maskd.masks import pad_rows

    for dtype, np_view in ((mx.float32, np.int32), (mx.bfloat16, np.int16), (mx.float16, np.int16)):
        for rows, words, width, live, masks, x in _cases(6):
            if len(live) != rows:
                continue
            a = mx.array(x).astype(dtype)
            a_bits = np.array(a.view(mx.int32 if np_view is np.int32 else mx.int16))
            ninf = int(np.array(mx.array(-np.inf, dtype=dtype).view(
                mx.int32 if np_view is np.int32 else mx.int16)))
            want = _want(a_bits, ninf, masks, live)
            got = _bitmask_mlx.apply_words(a, pad_rows(masks, width, rows), fused=fused)
            got_bits = np.array(got.view(mx.int32 if np_view is np.int32 else mx.int16))
            assert np.array_equal(got_bits, want), (dtype, rows, width)
            via = maskd.apply_mask(a, masks)
            assert np.array_equal(np.array(via.view(mx.int32 if np_view is np.int32 else mx.int16)), want)
