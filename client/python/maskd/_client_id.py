"""The ``client_id`` of maskd.Client and maskd.aio.AsyncClient: its rule, and the channel
interceptors that send it as the ``maskd-client-id`` metadata of every call on the channel
(the stub's, health, shared memory, streams), which a server run with
``--client-identity=header`` reads as the client its per-client shares count against
(docs/reliability.md, "Per-client shares").

The interceptors' methods are typed ``Any``: gRPC's stubs declare them generic per call
over request and response types, and these pass every call through unchanged.
"""
from __future__ import annotations

import re
from typing import Any, Callable, List, Optional, Tuple, Union

import grpc
import grpc.aio

# The metadata key (the server's kClientIdHeader, service/client_identity.h).
CLIENT_ID_METADATA_KEY = "maskd-client-id"
# The server's rule: an id of any other form counts as the connection, silently.
CLIENT_ID_RULE = "1 to 128 bytes of [A-Za-z0-9._:@/+-]"
_CLIENT_ID = re.compile(r"[A-Za-z0-9._:@/+\-]{1,128}")

_Metadata = Tuple[Tuple[str, Union[str, bytes]], ...]


def checked_client_id(client_id: Optional[str]) -> Optional[str]:
    """``client_id`` when it is None (not sent) or of the server's form; ValueError naming
    the rule otherwise, so a bad id fails when the client is made, not on every call."""
    if client_id is None:
        return None
    if not isinstance(client_id, str) or not _CLIENT_ID.fullmatch(client_id):
        raise ValueError(f"client_id {client_id!r} is not valid: a client id is {CLIENT_ID_RULE}")
    return client_id


class _CallDetails(grpc.ClientCallDetails):
    """A call's details with the client id added to its metadata."""

    def __init__(self, base: grpc.ClientCallDetails, id_metadata: _Metadata) -> None:
        self.method = base.method
        self.timeout = base.timeout
        self.metadata = tuple(base.metadata or ()) + id_metadata
        self.credentials = base.credentials
        self.wait_for_ready = base.wait_for_ready
        self.compression = base.compression


class ClientIdInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                          grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds ``maskd-client-id`` to every call of a synchronous channel
    (``grpc.intercept_channel(channel, ClientIdInterceptor(id))``)."""

    def __init__(self, client_id: str) -> None:
        self._metadata: _Metadata = ((CLIENT_ID_METADATA_KEY, client_id),)

    def intercept_unary_unary(self, continuation: Callable[..., Any],
                              client_call_details: grpc.ClientCallDetails, request: Any) -> Any:
        return continuation(_CallDetails(client_call_details, self._metadata), request)

    def intercept_unary_stream(self, continuation: Callable[..., Any],
                               client_call_details: grpc.ClientCallDetails, request: Any) -> Any:
        return continuation(_CallDetails(client_call_details, self._metadata), request)

    def intercept_stream_unary(self, continuation: Callable[..., Any],
                               client_call_details: grpc.ClientCallDetails,
                               request_iterator: Any) -> Any:
        return continuation(_CallDetails(client_call_details, self._metadata), request_iterator)

    def intercept_stream_stream(self, continuation: Callable[..., Any],
                                client_call_details: grpc.ClientCallDetails,
                                request_iterator: Any) -> Any:
        return continuation(_CallDetails(client_call_details, self._metadata), request_iterator)


class _AioClientId:
    """What the four grpc.aio interceptors below share: the id, and a call's details with it."""

    def __init__(self, client_id: str) -> None:
        self._client_id = client_id

    def _details(self, base: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        # A copy: the caller's metadata object may be reused across calls.
        metadata = grpc.aio.Metadata.from_tuple(tuple(base.metadata or ()))
        metadata.add(CLIENT_ID_METADATA_KEY, self._client_id)
        return grpc.aio.ClientCallDetails(base.method, base.timeout, metadata, base.credentials,
                                          base.wait_for_ready)


# grpc.aio files an interceptor under the first of the four kinds it is, so each kind
# has its own class.
class _AioUnaryUnary(_AioClientId, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Callable[..., Any],
                                    client_call_details: grpc.aio.ClientCallDetails,
                                    request: Any) -> Any:
        return await continuation(self._details(client_call_details), request)


class _AioUnaryStream(_AioClientId, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Callable[..., Any],
                                     client_call_details: grpc.aio.ClientCallDetails,
                                     request: Any) -> Any:
        return await continuation(self._details(client_call_details), request)


class _AioStreamUnary(_AioClientId, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation: Callable[..., Any],
                                     client_call_details: grpc.aio.ClientCallDetails,
                                     request_iterator: Any) -> Any:
        return await continuation(self._details(client_call_details), request_iterator)


class _AioStreamStream(_AioClientId, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation: Callable[..., Any],
                                      client_call_details: grpc.aio.ClientCallDetails,
                                      request_iterator: Any) -> Any:
        return await continuation(self._details(client_call_details), request_iterator)


def aio_client_id_interceptors(client_id: str) -> List[grpc.aio.ClientInterceptor]:
    """The interceptors (``grpc.aio.insecure_channel(..., interceptors=...)``) that add
    ``maskd-client-id`` to every call of an asyncio channel."""
    return [_AioUnaryUnary(client_id), _AioUnaryStream(client_id), _AioStreamUnary(client_id),
            _AioStreamStream(client_id)]
