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
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

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


def _with_id(metadata: Optional[Sequence[Tuple[str, Union[str, bytes]]]],
             client_id: str) -> _Metadata:
    return tuple(metadata or ()) + ((CLIENT_ID_METADATA_KEY, client_id),)


class _CallDetails(grpc.ClientCallDetails):
    """A call's details with the client id added to its metadata."""

    def __init__(self, base: grpc.ClientCallDetails, client_id: str) -> None:
        self.method = base.method
        self.timeout = base.timeout
        self.metadata = _with_id(base.metadata, client_id)
        self.credentials = base.credentials
        self.wait_for_ready = base.wait_for_ready
        self.compression = base.compression


class ClientIdInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                          grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds ``maskd-client-id`` to every call of a synchronous channel
    (``grpc.intercept_channel(channel, ClientIdInterceptor(id))``)."""

    def __init__(self, client_id: str) -> None:
        self._client_id = client_id

    def intercept_unary_unary(self, continuation: Callable[..., Any],
                              client_call_details: grpc.ClientCallDetails, request: Any) -> Any:
        return continuation(_CallDetails(client_call_details, self._client_id), request)

    def intercept_unary_stream(self, continuation: Callable[..., Any],
                               client_call_details: grpc.ClientCallDetails, request: Any) -> Any:
        return continuation(_CallDetails(client_call_details, self._client_id), request)

    def intercept_stream_unary(self, continuation: Callable[..., Any],
                               client_call_details: grpc.ClientCallDetails,
                               request_iterator: Any) -> Any:
        return continuation(_CallDetails(client_call_details, self._client_id), request_iterator)

    def intercept_stream_stream(self, continuation: Callable[..., Any],
                                client_call_details: grpc.ClientCallDetails,
                                request_iterator: Any) -> Any:
        return continuation(_CallDetails(client_call_details, self._client_id), request_iterator)


def _aio_details(base: grpc.aio.ClientCallDetails, client_id: str) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata.from_tuple(tuple(base.metadata or ()))
    metadata.add(CLIENT_ID_METADATA_KEY, client_id)
    return grpc.aio.ClientCallDetails(base.method, base.timeout, metadata, base.credentials,
                                      base.wait_for_ready)


# grpc.aio files an interceptor under the first of the four kinds it is, so each kind
# has its own class.
class _AioUnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, client_id: str) -> None:
        self._client_id = client_id

    async def intercept_unary_unary(self, continuation: Callable[..., Any],
                                    client_call_details: grpc.aio.ClientCallDetails,
                                    request: Any) -> Any:
        return await continuation(_aio_details(client_call_details, self._client_id), request)


class _AioUnaryStream(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, client_id: str) -> None:
        self._client_id = client_id

    async def intercept_unary_stream(self, continuation: Callable[..., Any],
                                     client_call_details: grpc.aio.ClientCallDetails,
                                     request: Any) -> Any:
        return await continuation(_aio_details(client_call_details, self._client_id), request)


class _AioStreamUnary(grpc.aio.StreamUnaryClientInterceptor):
    def __init__(self, client_id: str) -> None:
        self._client_id = client_id

    async def intercept_stream_unary(self, continuation: Callable[..., Any],
                                     client_call_details: grpc.aio.ClientCallDetails,
                                     request_iterator: Any) -> Any:
        return await continuation(_aio_details(client_call_details, self._client_id),
                                  request_iterator)


class _AioStreamStream(grpc.aio.StreamStreamClientInterceptor):
    def __init__(self, client_id: str) -> None:
        self._client_id = client_id

    async def intercept_stream_stream(self, continuation: Callable[..., Any],
                                      client_call_details: grpc.aio.ClientCallDetails,
                                      request_iterator: Any) -> Any:
        return await continuation(_aio_details(client_call_details, self._client_id),
                                  request_iterator)


def aio_client_id_interceptors(client_id: str) -> List[grpc.aio.ClientInterceptor]:
    """The interceptors (``grpc.aio.insecure_channel(..., interceptors=...)``) that add
    ``maskd-client-id`` to every call of an asyncio channel."""
    return [_AioUnaryUnary(client_id), _AioUnaryStream(client_id), _AioStreamUnary(client_id),
            _AioStreamStream(client_id)]
