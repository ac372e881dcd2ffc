"""Logits in POSIX shared memory, masked in place by maskd (SharedMemory.StepInRegion).

    with maskd.shm.ShmLogits(client, rows=16, vocab=151936) as region:
        region.array[:] = logits                    # or region.tensor() (torch view)
        reply = region.step([(sid, [tok]) ...])     # the server sets disallowed logits to -inf
        next_tokens = region.array.argmax(-1)

The server must run with --allow_shm and a --shm_prefix that the key starts
with ("/maskd-" by default); the object is created by this process (owner:
this user) and unlinked on close. Registration goes over the client's channel,
so use the unix socket (the server may refuse shared memory on TCP).
"""
from __future__ import annotations

import os
import secrets
from multiprocessing import shared_memory
from typing import Any, Iterable, Optional, Sequence

import numpy as np
import numpy.typing as npt

from maskd._common import EntryLike, MaskdError, status_code, step_request
from maskd.client import Client
from maskd.v1 import shm_pb2 as shm_pb

_DTYPES = {
    # name: (element bytes, LogitsDtype, numpy dtype or None)
    "float32": (4, shm_pb.LOGITS_DTYPE_FP32, np.float32),
    "float16": (2, shm_pb.LOGITS_DTYPE_FP16, np.float16),
    "bfloat16": (2, shm_pb.LOGITS_DTYPE_BF16, None),
}


class ShmLogits:
    """A (rows, vocab) logits buffer in a new POSIX shm object, registered with maskd.

    Args:
      client: a maskd.Client (its ``shm`` service is used).
      rows, vocab: the buffer's shape (vocab = the model's logits width).
      dtype: "float32", "float16" or "bfloat16" (bfloat16: torch view only).
      prefix: the server's --shm_prefix.
    """

    def __init__(self, client: Client, rows: int, vocab: int, dtype: str = "float32", *,
                 prefix: str = "/maskd-"):
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {sorted(_DTYPES)}")
        if rows < 1 or vocab < 1:
            raise ValueError("rows and vocab must be >= 1")
        self.client = client
        self.rows, self.vocab, self.dtype = rows, vocab, dtype
        elem, self._pb_dtype, self._np_dtype = _DTYPES[dtype]
        self.byte_size = rows * vocab * elem
        token = f"{os.getpid()}-{secrets.token_hex(6)}"
        # SharedMemory prepends "/" itself on POSIX.
        shm = shared_memory.SharedMemory(name=prefix.lstrip("/") + token, create=True,
                                         size=self.byte_size)
        self._shm: Optional[shared_memory.SharedMemory] = shm  # None once closed
        self.key = "/" + shm.name.lstrip("/")
        self.region = f"py-{token}"
        self._registered = False
        try:
            client.shm.register_system_region(self.region, self.key, self.byte_size)
            self._registered = True
        except BaseException:
            self._release()
            raise

    @classmethod
    def from_array(cls, client: Client, logits: Any, **kw: Any) -> "ShmLogits":
        """A region holding a copy of ``logits`` (NumPy array or torch CPU tensor, (rows, vocab))."""
        mod = type(logits).__module__
        if mod.startswith("torch"):
            import torch

            name = {torch.float32: "float32", torch.float16: "float16",
                    torch.bfloat16: "bfloat16"}.get(logits.dtype)
            if name is None:
                raise ValueError(f"unsupported torch dtype {logits.dtype}")
            r = cls(client, logits.shape[0], logits.shape[1], name, **kw)
            r.tensor().copy_(logits)
            return r
        arr = np.asarray(logits)
        name = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16"}.get(arr.dtype)
        if name is None or arr.ndim != 2:
            raise ValueError("logits must be a 2-D float32/float16 array")
        r = cls(client, arr.shape[0], arr.shape[1], name, **kw)
        r.array[...] = arr
        return r

    @property
    def array(self) -> npt.NDArray[Any]:
        """A NumPy (rows, vocab) view of the shared buffer (float32 / float16)."""
        if self._np_dtype is None:
            raise TypeError("no NumPy dtype for bfloat16: use tensor()")
        view: npt.NDArray[Any] = np.ndarray((self.rows, self.vocab), dtype=self._np_dtype,
                                            buffer=self._buffer())
        return view

    def tensor(self) -> Any:
        """A torch (rows, vocab) CPU tensor sharing the buffer."""
        import torch

        dt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[self.dtype]
        return torch.frombuffer(self._buffer(), dtype=dt).view(self.rows, self.vocab)

    def step(self, entries: Iterable[EntryLike], *, row_map: Optional[Sequence[int]] = None,
             rows: Optional[int] = None, check: bool = True) -> shm_pb.StepInRegionResponse:
        """One Step whose masks are applied in place to this buffer's logits.

        Row r gets entries[r]'s mask (or ``row_map[r]``'s; -1 leaves it untouched).
        With ``check``, a failed entry raises MaskdError (its rows were left untouched).
        """
        req = shm_pb.StepInRegionRequest()
        req.entries.extend(step_request(entries).entries)
        t = req.logits
        t.region, t.dtype, t.vocab = self.region, self._pb_dtype, self.vocab
        t.rows = rows if rows is not None else (len(row_map) if row_map is not None
                                                else min(self.rows, len(req.entries)))
        if row_map is not None:
            t.row_map.extend(int(r) for r in row_map)
        resp = self.client.shm.step_in_region(req)
        if check:
            for i, r in enumerate(resp.results):
                if r.status.code != 0:
                    raise MaskdError(status_code(r.status.code), r.status.message, entry=i)
        return resp

    def _buffer(self) -> memoryview:
        buf = self._shm.buf if self._shm is not None else None
        if buf is None:
            raise ValueError("ShmLogits is closed")
        return buf

    def _release(self) -> None:
        if self._shm is None:
            return
        try:
            self._shm.close()
        finally:
            try:
                self._shm.unlink()
            except FileNotFoundError:
                pass

    def close(self) -> None:
        """Unregisters the region, then unmaps and unlinks the object."""
        if self._shm is None:
            return
        try:
            if self._registered:
                self.client.shm.unregister_region(self.region)
        finally:
            self._registered = False
            self._release()
            self._shm = None

    def __enter__(self) -> "ShmLogits":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
