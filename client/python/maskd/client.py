"""maskd.Client: the synchronous client of the maskd sidecar (proto/maskd/v1).

One Client owns one gRPC channel and is thread-safe. Every method raises
``MaskdError`` (gRPC code + server message) on failure. The hot path is
``step`` (one call per decoding step for a whole batch), ``step_async`` (the
same call started without waiting: the adapters overlap it with the model's
forward pass) and ``StepStream``.

    with maskd.Client("unix:///tmp/maskd.sock") as c:
        s = c.create_session(tokenizer="qwen3", regex="(cat|dog)s?")
        reply = c.step([(s.session_id, [])])        # first mask
        allowed = maskd.allowed_tokens(reply.masks[0])
"""
from __future__ import annotations

import queue
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, TypeVar

import grpc
from grpc_health.v1 import health_pb2 as health_pb

from maskd._client_id import ClientIdInterceptor, checked_client_id
from maskd._common import (DEFAULT_MAX_MESSAGE_BYTES, HEALTH_CHECK_METHOD, EntryLike, GrammarLike,
                           JsonLike, MaskdError, MaskReply, StepReply, channel_options,
                           compile_request, create_session_request, serving_status_name,
                           step_request)
from maskd.v1 import maskd_pb2 as pb
from maskd.v1 import maskd_pb2_grpc as pb_grpc
from maskd.v1 import shm_pb2 as shm_pb
from maskd.v1 import shm_pb2_grpc as shm_grpc

Resp = TypeVar("Resp")


def _rpc(fn: Callable[..., Resp], req: Any, timeout: Optional[float]) -> Resp:
    try:
        return fn(req, timeout=timeout)
    except grpc.RpcError as e:
        raise MaskdError.from_rpc(e) from None


class StepFuture:
    """A Step in flight (``Client.step_async``); ``result()`` waits for its reply."""

    def __init__(self, fut: grpc.Future[pb.StepResponse]):
        self._fut = fut

    def done(self) -> bool:
        return self._fut.done()

    def result(self, timeout: Optional[float] = None) -> StepReply:
        try:
            return StepReply.from_proto(self._fut.result(timeout=timeout))
        except grpc.RpcError as e:
            raise MaskdError.from_rpc(e) from None

    def cancel(self) -> bool:
        return self._fut.cancel()


class StepStream:
    """A bidirectional Step stream: one reply per request, in order. One decoding
    loop owns it (not thread-safe). ``send`` + ``recv`` let a caller keep one
    request in flight while it does other work; ``step`` does both."""

    def __init__(self, stub: pb_grpc.MaskdStub, timeout: Optional[float]):
        # Requests for gRPC's sending thread, in order; None ends the stream.
        self._requests: queue.SimpleQueue[Optional[pb.StepRequest]] = queue.SimpleQueue()
        self._closed = False

        def requests() -> Iterator[pb.StepRequest]:
            while (item := self._requests.get()) is not None:
                yield item

        self._call = stub.StepStream(requests(), timeout=timeout)
        self._pending = 0

    def send(self, entries: Iterable[EntryLike], words_per_row: int = 0) -> None:
        """Queues one StepRequest (its reply comes back, in order, from ``recv``)."""
        if self._closed:
            raise MaskdError(grpc.StatusCode.FAILED_PRECONDITION, "step stream is closed")
        self._requests.put(step_request(entries, words_per_row))
        self._pending += 1

    def recv(self) -> StepReply:
        """The reply to the oldest request sent and not yet received."""
        if self._pending == 0:
            raise MaskdError(grpc.StatusCode.FAILED_PRECONDITION, "recv without a request in flight")
        try:
            resp = next(self._call)
        except StopIteration:
            raise MaskdError(grpc.StatusCode.UNAVAILABLE, "step stream ended by the server") from None
        except grpc.RpcError as e:
            raise MaskdError.from_rpc(e) from None
        self._pending -= 1
        return StepReply.from_proto(resp)

    def step(self, entries: Iterable[EntryLike], words_per_row: int = 0) -> StepReply:
        self.send(entries, words_per_row)
        return self.recv()

    def close(self) -> None:
        """Half-closes the stream and waits for the server's final status."""
        if self._closed:
            return
        self._closed = True
        self._requests.put(None)
        try:
            for _ in self._call:  # drain replies not received
                pass
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                raise MaskdError.from_rpc(e) from None

    def __enter__(self) -> "StepStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SharedMemoryClient:
    """The maskd.v1.SharedMemory service on a Client's channel (``Client.shm``).
    See maskd.shm.ShmLogits for the helper that creates, registers and steps a region."""

    def __init__(self, channel: grpc.Channel, timeout: Optional[float]):
        self._stub = shm_grpc.SharedMemoryStub(channel)
        self._timeout = timeout

    def register_system_region(self, name: str, key: str, byte_size: int, offset: int = 0) -> None:
        _rpc(self._stub.RegisterSystemRegion,
             shm_pb.RegisterSystemRegionRequest(name=name, key=key, offset=offset, byte_size=byte_size),
             self._timeout)

    def register_cuda_region(self, name: str, raw_handle: bytes, device_id: int, byte_size: int,
                             offset: int = 0) -> None:
        _rpc(self._stub.RegisterCudaRegion,
             shm_pb.RegisterCudaRegionRequest(name=name, raw_handle=raw_handle, device_id=device_id,
                                              offset=offset, byte_size=byte_size), self._timeout)

    def list_regions(self, name: str = "") -> List[shm_pb.RegionStatus]:
        return list(_rpc(self._stub.ListRegions, shm_pb.ListRegionsRequest(name=name),
                         self._timeout).regions)

    def unregister_region(self, name: str = "") -> None:
        _rpc(self._stub.UnregisterRegion, shm_pb.UnregisterRegionRequest(name=name), self._timeout)

    def step_in_region(self, req: shm_pb.StepInRegionRequest) -> shm_pb.StepInRegionResponse:
        """One Step whose masks land in a region (``req.masks``) or are applied to logits there
        (``req.logits``). Entry errors are in the reply's results."""
        return _rpc(self._stub.StepInRegion, req, self._timeout)


class Client:
    """A synchronous maskd client over one gRPC channel (thread-safe).

    Args:
      addr: ``unix:///abs/path``, ``unix:relative``, ``host:port``.
      timeout: seconds allowed to every call; None: no deadline.
      max_message_bytes: gRPC send/receive limit (raise it for very large batches).
      client_name: the engine this client serves ("vllm", "sglang", "llama.cpp",
        "transformers", "mlx-lm", "outlines"), sent in the user agent so that the server's
        per-engine metrics count its steps (docs/operations.md); None: not said.
      client_id: who this client is to a server run with ``--client-identity=header``
        (whose per-client shares its sessions, tokenizers, streams and regions count
        against; clients with one id share one share): sent as the ``maskd-client-id``
        metadata of every call on ``channel`` (stub, health, ``shm``, streams). 1 to 128
        bytes of ``[A-Za-z0-9._:@/+-]``, else ValueError; None: not sent.
    """

    def __init__(self, addr: str, *, timeout: Optional[float] = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 client_name: Optional[str] = None, client_id: Optional[str] = None):
        self.addr = addr
        self.timeout = timeout
        self.client_id = checked_client_id(client_id)
        self.channel = grpc.insecure_channel(
            addr, options=channel_options(max_message_bytes, client_name))
        if self.client_id is not None:
            self.channel = grpc.intercept_channel(self.channel, ClientIdInterceptor(self.client_id))
        # The generated stub of maskd.v1.Maskd on this channel (every method below is one
        # call of it), and grpc.health.v1 Health/Check (messages from grpcio-health-checking).
        self.stub = pb_grpc.MaskdStub(self.channel)
        self.health_check: grpc.UnaryUnaryMultiCallable[
            health_pb.HealthCheckRequest, health_pb.HealthCheckResponse] = self.channel.unary_unary(
                HEALTH_CHECK_METHOD,
                request_serializer=health_pb.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb.HealthCheckResponse.FromString)
        self.shm = SharedMemoryClient(self.channel, timeout)

    # -- lifetime -------------------------------------------------------------
    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- server ---------------------------------------------------------------
    def health(self, service: str = "") -> str:
        """grpc.health.v1 Check: "SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN"."""
        r = _rpc(self.health_check, health_pb.HealthCheckRequest(service=service), self.timeout)
        return serving_status_name(r.status)

    def ping(self) -> None:
        _rpc(self.stub.Ping, pb.PingRequest(), self.timeout)

    def stats(self) -> pb.StatsResponse:
        return _rpc(self.stub.Stats, pb.StatsRequest(), self.timeout)

    # -- tokenizers -----------------------------------------------------------
    def list_tokenizers(self) -> List[pb.Tokenizer]:
        return list(_rpc(self.stub.ListTokenizers, pb.ListTokenizersRequest(), self.timeout).tokenizers)

    def tokenizer(self, name: str) -> pb.Tokenizer:
        """One tokenizer by name (NOT_FOUND when the server has none of that name)."""
        for t in self.list_tokenizers():
            if t.name == name:
                return t
        raise MaskdError(grpc.StatusCode.NOT_FOUND, f"no tokenizer named {name!r}")

    def register_tokenizer(self, name: str, tokenizer_json: bytes, *,
                           tokenizer_config_json: bytes = b"", vocab_size: int = 0,
                           eos_ids: Sequence[int] = ()) -> pb.Tokenizer:
        req = pb.RegisterTokenizerRequest(name=name, tokenizer_json=tokenizer_json,
                                          tokenizer_config_json=tokenizer_config_json,
                                          vocab_size=vocab_size, eos_ids=list(eos_ids))
        return _rpc(self.stub.RegisterTokenizer, req, self.timeout).tokenizer

    def detokenize(self, tokenizer: str, tokens: Sequence[int], include_special: bool = False) -> bytes:
        req = pb.DetokenizeRequest(tokenizer=tokenizer, tokens=[int(t) for t in tokens],
                                   include_special=include_special)
        return _rpc(self.stub.Detokenize, req, self.timeout).text

    # -- indexes --------------------------------------------------------------
    def compile(self, tokenizer: str, *, regex: Optional[str] = None,
                json_schema: Optional[JsonLike] = None, grammar: Optional[GrammarLike] = None,
                structural_tag: Optional[JsonLike] = None,
                eager: bool = False, timeout_ms: int = 0, schema_route: str = "auto",
                any_property_order: bool = False, eager_dfa: bool = False,
                wait: bool = True) -> pb.CompileResponse:
        """Compiles (or finds cached) the index of one constraint: a regex, a JSON Schema (a
        str or a dict), a grammar (a ``Grammar``, or a str of Lark) or a structural tag (a
        str or a dict)."""
        req = compile_request(tokenizer, regex=regex, json_schema=json_schema, grammar=grammar,
                              structural_tag=structural_tag, eager=eager, timeout_ms=timeout_ms,
                              schema_route=schema_route, any_property_order=any_property_order,
                              eager_dfa=eager_dfa, wait=wait)
        return _rpc(self.stub.Compile, req, self.timeout)

    def get_index(self, index_id: str, wait: bool = False) -> pb.CompileResponse:
        return _rpc(self.stub.GetIndex, pb.GetIndexRequest(index_id=index_id, wait=wait), self.timeout)

    def cancel_compile(self, index_id: str) -> bool:
        return _rpc(self.stub.CancelCompile, pb.CancelCompileRequest(index_id=index_id),
                    self.timeout).cancelled

    # -- sessions -------------------------------------------------------------
    def create_session(self, index_id: Optional[str] = None, *, tokenizer: Optional[str] = None,
                       regex: Optional[str] = None, json_schema: Optional[JsonLike] = None,
                       grammar: Optional[GrammarLike] = None,
                       structural_tag: Optional[JsonLike] = None,
                       eager: bool = False) -> pb.CreateSessionResponse:
        """A session at the start of an index, given by ``index_id`` or compiled from
        ``tokenizer`` + a constraint (as ``compile``) in the same call."""
        req = create_session_request(index_id, tokenizer=tokenizer, regex=regex,
                                     json_schema=json_schema, grammar=grammar,
                                     structural_tag=structural_tag, eager=eager)
        return _rpc(self.stub.CreateSession, req, self.timeout)

    def close_session(self, session_id: int) -> None:
        _rpc(self.stub.CloseSession, pb.CloseSessionRequest(session_id=session_id), self.timeout)

    def fork_session(self, session_id: int) -> int:
        """A new session in the same state; returns its id."""
        return _rpc(self.stub.ForkSession, pb.ForkSessionRequest(session_id=session_id),
                    self.timeout).session_id

    def rollback(self, session_id: int, num_tokens: int) -> int:
        """Undoes the last ``num_tokens`` tokens; returns the tokens left."""
        return _rpc(self.stub.Rollback, pb.RollbackRequest(session_id=session_id, num_tokens=num_tokens),
                    self.timeout).num_tokens

    # -- steps ----------------------------------------------------------------
    def step(self, entries: Iterable[EntryLike], words_per_row: int = 0) -> StepReply:
        """One decoding step for a batch: ``entries`` are session ids or
        ``(session_id, tokens_since_last_step[, rollback])``. Entry errors are in
        ``reply.results[i].status`` (``reply.raise_for_status()`` raises them)."""
        return StepReply.from_proto(_rpc(self.stub.Step, step_request(entries, words_per_row),
                                         self.timeout))

    def step_async(self, entries: Iterable[EntryLike], words_per_row: int = 0) -> StepFuture:
        """Starts a Step and returns at once; ``.result()`` waits for the reply."""
        return StepFuture(self.stub.Step.future(step_request(entries, words_per_row),
                                                 timeout=self.timeout))

    def step_stream(self) -> StepStream:
        """Opens a StepStream (close it, or use it as a context manager)."""
        return StepStream(self.stub, self.timeout)

    def mask(self, index_id: str, tokens: Sequence[int] = (), words_per_row: int = 0,
             max_tokens_left: int = 0) -> MaskReply:
        """Stateless: the mask after ``tokens`` from the start of an index."""
        req = pb.MaskRequest(index_id=index_id, tokens=[int(t) for t in tokens], words_per_row=words_per_row,
                             max_tokens_left=max_tokens_left)
        return MaskReply.from_proto(_rpc(self.stub.Mask, req, self.timeout))
