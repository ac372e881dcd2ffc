"""maskd.aio.AsyncClient: the asyncio client (grpc.aio), the same methods as maskd.Client.

    async with maskd.aio.AsyncClient("unix:///tmp/maskd.sock") as c:
        s = await c.create_session(tokenizer="qwen3", regex="[0-9]+")
        reply = await c.step([(s.session_id, [])])
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, List, Optional, Sequence, TypeVar

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2 as health_pb

from maskd._client_id import aio_client_id_interceptors, checked_client_id
from maskd._common import (DEFAULT_MAX_MESSAGE_BYTES, HEALTH_CHECK_METHOD, EntryLike, GrammarLike,
                           JsonLike, MaskdError, MaskReply, StepReply, channel_options,
                           compile_request, create_session_request, serving_status_name,
                           step_request)
from maskd.v1 import maskd_pb2 as pb
from maskd.v1 import maskd_pb2_grpc as pb_grpc
from maskd.v1 import shm_pb2 as shm_pb
from maskd.v1 import shm_pb2_grpc as shm_grpc


Resp = TypeVar("Resp")


async def _rpc(fn: Callable[..., Awaitable[Resp]], req: Any, timeout: Optional[float]) -> Resp:
    try:
        return await fn(req, timeout=timeout)
    except grpc.RpcError as e:
        raise MaskdError.from_rpc(e) from None


class AsyncStepStream:
    """A StepStream on asyncio: ``await step(entries)``; ``send``/``recv`` to keep one in flight."""

    def __init__(self, call: grpc.aio.StreamStreamCall[pb.StepRequest, pb.StepResponse]):
        self._call = call

    async def send(self, entries: Iterable[EntryLike], words_per_row: int = 0) -> None:
        try:
            await self._call.write(step_request(entries, words_per_row))
        except grpc.RpcError as e:
            raise MaskdError.from_rpc(e) from None

    async def recv(self) -> StepReply:
        try:
            resp = await self._call.read()
        except grpc.RpcError as e:
            raise MaskdError.from_rpc(e) from None
        if not isinstance(resp, pb.StepResponse):  # grpc.aio.EOF: the server ended the stream
            code = await self._call.code()
            raise MaskdError(code, await self._call.details() or "step stream ended")
        return StepReply.from_proto(resp)

    async def step(self, entries: Iterable[EntryLike], words_per_row: int = 0) -> StepReply:
        await self.send(entries, words_per_row)
        return await self.recv()

    async def close(self) -> None:
        await self._call.done_writing()
        code = await self._call.code()
        if code not in (grpc.StatusCode.OK, grpc.StatusCode.CANCELLED):
            raise MaskdError(code, await self._call.details() or "")

    async def __aenter__(self) -> "AsyncStepStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSharedMemoryClient:
    """maskd.v1.SharedMemory on an AsyncClient's channel (``AsyncClient.shm``)."""

    def __init__(self, channel: grpc.aio.Channel, timeout: Optional[float]):
        self._stub = shm_grpc.SharedMemoryStub(channel)
        self._timeout = timeout

    async def register_system_region(self, name: str, key: str, byte_size: int, offset: int = 0) -> None:
        await _rpc(self._stub.RegisterSystemRegion,
                   shm_pb.RegisterSystemRegionRequest(name=name, key=key, offset=offset,
                                                      byte_size=byte_size), self._timeout)

    async def register_cuda_region(self, name: str, raw_handle: bytes, device_id: int, byte_size: int,
                                   offset: int = 0) -> None:
        await _rpc(self._stub.RegisterCudaRegion,
                   shm_pb.RegisterCudaRegionRequest(name=name, raw_handle=raw_handle,
                                                    device_id=device_id, offset=offset,
                                                    byte_size=byte_size), self._timeout)

    async def list_regions(self, name: str = "") -> List[shm_pb.RegionStatus]:
        r = await _rpc(self._stub.ListRegions, shm_pb.ListRegionsRequest(name=name), self._timeout)
        return list(r.regions)

    async def unregister_region(self, name: str = "") -> None:
        await _rpc(self._stub.UnregisterRegion, shm_pb.UnregisterRegionRequest(name=name), self._timeout)

    async def step_in_region(self, req: shm_pb.StepInRegionRequest) -> shm_pb.StepInRegionResponse:
        return await _rpc(self._stub.StepInRegion, req, self._timeout)


class AsyncClient:
    """The asyncio twin of maskd.Client (same arguments, same methods, awaitable)."""

    def __init__(self, addr: str, *, timeout: Optional[float] = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 client_name: Optional[str] = None, client_id: Optional[str] = None):
        self.addr = addr
        self.timeout = timeout
        self.client_id = checked_client_id(client_id)
        self.channel = grpc.aio.insecure_channel(
            addr, options=channel_options(max_message_bytes, client_name),
            interceptors=aio_client_id_interceptors(self.client_id) if self.client_id else None)
        # As maskd.Client's: the generated stub and grpc.health.v1 Health/Check.
        self.stub = pb_grpc.MaskdStub(self.channel)
        self.health_check: grpc.aio.UnaryUnaryMultiCallable[
            health_pb.HealthCheckRequest, health_pb.HealthCheckResponse] = self.channel.unary_unary(
                HEALTH_CHECK_METHOD,
                request_serializer=health_pb.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb.HealthCheckResponse.FromString)
        self.shm = AsyncSharedMemoryClient(self.channel, timeout)

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def health(self, service: str = "") -> str:
        r = await _rpc(self.health_check, health_pb.HealthCheckRequest(service=service),
                       self.timeout)
        return serving_status_name(r.status)

    async def ping(self) -> None:
        await _rpc(self.stub.Ping, pb.PingRequest(), self.timeout)

    async def stats(self) -> pb.StatsResponse:
        return await _rpc(self.stub.Stats, pb.StatsRequest(), self.timeout)

    async def list_tokenizers(self) -> List[pb.Tokenizer]:
        r = await _rpc(self.stub.ListTokenizers, pb.ListTokenizersRequest(), self.timeout)
        return list(r.tokenizers)

    async def register_tokenizer(self, name: str, tokenizer_json: bytes, *,
                                 tokenizer_config_json: bytes = b"", vocab_size: int = 0,
                                 eos_ids: Sequence[int] = ()) -> pb.Tokenizer:
        req = pb.RegisterTokenizerRequest(name=name, tokenizer_json=tokenizer_json,
                                          tokenizer_config_json=tokenizer_config_json,
                                          vocab_size=vocab_size, eos_ids=list(eos_ids))
        return (await _rpc(self.stub.RegisterTokenizer, req, self.timeout)).tokenizer

    async def detokenize(self, tokenizer: str, tokens: Sequence[int], include_special: bool = False) -> bytes:
        req = pb.DetokenizeRequest(tokenizer=tokenizer, tokens=[int(t) for t in tokens],
                                   include_special=include_special)
        return (await _rpc(self.stub.Detokenize, req, self.timeout)).text

    async def compile(self, tokenizer: str, *, regex: Optional[str] = None,
                      json_schema: Optional[JsonLike] = None, grammar: Optional[GrammarLike] = None,
                      structural_tag: Optional[JsonLike] = None,
                      eager: bool = False, timeout_ms: int = 0, schema_route: str = "auto",
                      any_property_order: bool = False, eager_dfa: bool = False,
                      wait: bool = True) -> pb.CompileResponse:
        req = compile_request(tokenizer, regex=regex, json_schema=json_schema, grammar=grammar,
                              structural_tag=structural_tag, eager=eager, timeout_ms=timeout_ms,
                              schema_route=schema_route, any_property_order=any_property_order,
                              eager_dfa=eager_dfa, wait=wait)
        return await _rpc(self.stub.Compile, req, self.timeout)

    async def get_index(self, index_id: str, wait: bool = False) -> pb.CompileResponse:
        return await _rpc(self.stub.GetIndex, pb.GetIndexRequest(index_id=index_id, wait=wait),
                          self.timeout)

    async def cancel_compile(self, index_id: str) -> bool:
        r = await _rpc(self.stub.CancelCompile, pb.CancelCompileRequest(index_id=index_id), self.timeout)
        return r.cancelled

    async def create_session(self, index_id: Optional[str] = None, *, tokenizer: Optional[str] = None,
                             regex: Optional[str] = None, json_schema: Optional[JsonLike] = None,
                             grammar: Optional[GrammarLike] = None,
                             structural_tag: Optional[JsonLike] = None,
                             eager: bool = False) -> pb.CreateSessionResponse:
        req = create_session_request(index_id, tokenizer=tokenizer, regex=regex,
                                     json_schema=json_schema, grammar=grammar,
                                     structural_tag=structural_tag, eager=eager)
        return await _rpc(self.stub.CreateSession, req, self.timeout)

    async def close_session(self, session_id: int) -> None:
        await _rpc(self.stub.CloseSession, pb.CloseSessionRequest(session_id=session_id), self.timeout)

    async def fork_session(self, session_id: int) -> int:
        r = await _rpc(self.stub.ForkSession, pb.ForkSessionRequest(session_id=session_id), self.timeout)
        return r.session_id

    async def rollback(self, session_id: int, num_tokens: int) -> int:
        r = await _rpc(self.stub.Rollback,
                       pb.RollbackRequest(session_id=session_id, num_tokens=num_tokens), self.timeout)
        return r.num_tokens

    async def step(self, entries: Iterable[EntryLike], words_per_row: int = 0) -> StepReply:
        return StepReply.from_proto(await _rpc(self.stub.Step, step_request(entries, words_per_row),
                                               self.timeout))

    def step_stream(self) -> AsyncStepStream:
        return AsyncStepStream(self.stub.StepStream(timeout=self.timeout))

    async def mask(self, index_id: str, tokens: Sequence[int] = (), words_per_row: int = 0,
                   max_tokens_left: int = 0) -> MaskReply:
        req = pb.MaskRequest(index_id=index_id, tokens=[int(t) for t in tokens], words_per_row=words_per_row,
                             max_tokens_left=max_tokens_left)
        return MaskReply.from_proto(await _rpc(self.stub.Mask, req, self.timeout))
