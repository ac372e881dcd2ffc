"""Pieces shared by the sync and asyncio clients: errors, request builders, reply views.

Masks. A mask row is ``words_per_row`` little-endian ``uint32`` words; token ``t``
is allowed iff bit ``t & 31`` of word ``t >> 5`` is 1 (README, docs/api.md).
Replies' mask bytes are exposed as read-only ``np.frombuffer`` views: no copy
beyond the one protobuf makes when the ``bytes`` field is read.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import grpc
import numpy as np
import numpy.typing as npt
from grpc_health.v1 import health_pb2 as health_pb

from maskd._version import __version__
from maskd.v1 import maskd_pb2 as pb

# gRPC's default receive limit is 4 MiB; 256 rows of a 128k vocabulary are
# ~4.1 MB. Matches the server's --max-message-bytes default.
DEFAULT_MAX_MESSAGE_BYTES = 64 << 20

# Longest server message kept in a MaskdError (the server bounds its own; this
# bounds what a misbehaving peer could make us carry around).
_MAX_MESSAGE_CHARS = 4096


class MaskdError(Exception):
    """Every failure of a maskd call: the gRPC status code and the server's message.

    Raised for a failed RPC and, by the adapters and ``StepReply.raise_for_status``,
    for a failed Step entry (``code`` is then that entry's code).
    """

    def __init__(self, code: grpc.StatusCode, message: str, *, entry: Optional[int] = None) -> None:
        self.code = code
        self.message = message[:_MAX_MESSAGE_CHARS]
        self.entry = entry
        where = f" (entry {entry})" if entry is not None else ""
        super().__init__(f"{code.name}{where}: {self.message}")

    @staticmethod
    def from_rpc(err: grpc.RpcError) -> "MaskdError":
        # Some RpcErrors carry no code (the base class has no code()), some a None one.
        code: Optional[grpc.StatusCode] = err.code() if hasattr(err, "code") else None
        details = err.details() if hasattr(err, "details") else str(err)
        return MaskdError(code or grpc.StatusCode.UNKNOWN, details or "")


_CODES: Dict[int, grpc.StatusCode] = {c.value[0]: c for c in grpc.StatusCode}


def status_code(value: int) -> grpc.StatusCode:
    """A numeric google.rpc.Code (as in StepResult.status.code) as a grpc.StatusCode."""
    return _CODES.get(value, grpc.StatusCode.UNKNOWN)


# The engine names maskd's metrics count steps by (maskd_client_step_calls_total{client}):
# a client_name outside this set is counted as "other".
CLIENT_NAMES = ("vllm", "sglang", "llama.cpp", "transformers", "mlx-lm", "outlines", "maskctl")


ChannelOptions = List[Tuple[str, Union[str, int]]]


def channel_options(max_message_bytes: int, client_name: Optional[str] = None) -> ChannelOptions:
    """gRPC channel options; ``client_name`` (e.g. "vllm") goes first in the user agent as
    ``maskd-<name>/<version>``, which the server's per-engine metrics read."""
    ua: ChannelOptions = []
    if client_name:
        ua = [("grpc.primary_user_agent", f"maskd-{client_name}/{__version__}")]
    return ua + [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        # gRPC's own reconnect backoff (1 s growing to 120 s) would leave a restarted
        # sidecar unused for minutes; cap it at 1 s (as the C++ ClientOptions).
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
        # gRPC core reads this one as the minimum connect timeout (connect, TLS handshake,
        # HTTP/2 settings), not as a backoff: 100 ms failed TLS handshakes under load.
        ("grpc.min_reconnect_backoff_ms", 5000),
    ]


# grpc.health.v1 Check, called by name on a client's channel (its messages come from
# grpcio-health-checking).
HEALTH_CHECK_METHOD = "/grpc.health.v1.Health/Check"


def serving_status_name(status: int) -> str:
    """A grpc.health.v1 ServingStatus by name: "SERVING", "NOT_SERVING", "UNKNOWN" or
    "SERVICE_UNKNOWN" ("UNKNOWN" for a value this version does not know)."""
    try:
        return health_pb.HealthCheckResponse.ServingStatus.Name(status)
    except ValueError:
        return "UNKNOWN"


# One Step entry: a session id, or (session_id, tokens), (session_id, tokens, rollback) or
# (session_id, tokens, rollback, max_tokens_left) (budget mode, see StepEntry in maskd.proto).
EntryLike = Union[int, Tuple[int, Sequence[int]], Tuple[int, Sequence[int], int],
                  Tuple[int, Sequence[int], int, int], pb.StepEntry]


def step_request(entries: Iterable[EntryLike], words_per_row: int = 0) -> pb.StepRequest:
    """Builds a StepRequest from (session_id, tokens[, rollback[, max_tokens_left]]) tuples
    or StepEntry messages."""
    req = pb.StepRequest(words_per_row=words_per_row)
    for e in entries:
        if isinstance(e, pb.StepEntry):
            req.entries.append(e)
        elif isinstance(e, int):
            req.entries.add(session_id=e)
        else:
            sid, toks, *rest = e
            ent = req.entries.add(session_id=int(sid), rollback=int(rest[0]) if rest else 0,
                                  max_tokens_left=int(rest[1]) if len(rest) > 1 else 0)
            ent.tokens.extend(int(t) for t in toks)
    return req


GRAMMAR_FORMATS = {"lark": pb.Grammar.FORMAT_LARK, "gbnf": pb.Grammar.FORMAT_GBNF,
                   "ebnf": pb.Grammar.FORMAT_EBNF}


@dataclasses.dataclass(frozen=True)
class Grammar:
    """A context-free grammar constraint (docs/grammars.md): its text and its format,
    ``"lark"`` (start rule ``start``), ``"gbnf"`` (llama.cpp) or ``"ebnf"`` (XGrammar),
    both with start rule ``root``. A plain ``str`` given as ``grammar=`` is Lark."""
    text: str
    format: str = "lark"


GrammarLike = Union[str, Grammar]
# A JSON document given as its text or as the dict json.dumps writes (a JSON Schema, a
# structural tag).
JsonLike = Union[str, Dict[str, Any]]


def grammar_message(grammar: GrammarLike) -> pb.Grammar:
    g = grammar if isinstance(grammar, Grammar) else Grammar(grammar)
    if g.format not in GRAMMAR_FORMATS:
        raise ValueError(f"grammar format {g.format!r}: expected lark, gbnf or ebnf")
    return pb.Grammar(text=g.text, format=GRAMMAR_FORMATS[g.format])


# CompileOptions.schema_route by name.
SCHEMA_ROUTES = {"auto": pb.SCHEMA_ROUTE_AUTO, "regex": pb.SCHEMA_ROUTE_REGEX,
                 "grammar": pb.SCHEMA_ROUTE_GRAMMAR}


def compile_request(tokenizer: str, *, regex: Optional[str] = None,
                    json_schema: Optional[JsonLike] = None,
                    grammar: Optional[GrammarLike] = None,
                    structural_tag: Optional[JsonLike] = None, eager: bool = False,
                    timeout_ms: int = 0, schema_route: str = "auto",
                    any_property_order: bool = False, eager_dfa: bool = False,
                    wait: bool = True) -> pb.CompileRequest:
    """A CompileRequest of exactly one constraint: ``regex``, ``json_schema`` (a str or a
    dict), ``grammar`` (a ``Grammar``, or a str of Lark) or ``structural_tag`` (a str or a
    dict: docs/grammars.md, "Structural tags"). ``schema_route`` ("auto", "regex" or
    "grammar"; JSON Schemas only) picks the engine (docs/json-schema.md, "Routes");
    ``any_property_order`` accepts a schema's object members in any order (grammar route);
    ``eager_dfa`` builds a regex's whole DFA (a grammar's: each terminal's) at compile instead
    of its states as sessions reach them (docs/service.md, "Lazy DFAs"). ``eager`` also computes
    every state's mask."""
    if sum(x is not None for x in (regex, json_schema, grammar, structural_tag)) != 1:
        raise ValueError("give exactly one of regex=, json_schema=, grammar= or structural_tag=")
    if schema_route not in SCHEMA_ROUTES:
        raise ValueError(f"schema_route {schema_route!r}: expected auto, regex or grammar")
    req = pb.CompileRequest(tokenizer=tokenizer, wait=wait,
                            options=pb.CompileOptions(eager=eager, timeout_ms=timeout_ms,
                                                      schema_route=SCHEMA_ROUTES[schema_route],
                                                      any_property_order=any_property_order,
                                                      eager_dfa=eager_dfa))
    if regex is not None:
        req.regex = regex
    elif grammar is not None:
        req.grammar.CopyFrom(grammar_message(grammar))
    elif structural_tag is not None:
        req.structural_tag = (structural_tag if isinstance(structural_tag, str)
                              else json.dumps(structural_tag))
    else:
        req.json_schema = json_schema if isinstance(json_schema, str) else json.dumps(json_schema)
    return req


def create_session_request(index_id: Optional[str] = None, *, tokenizer: Optional[str] = None,
                           regex: Optional[str] = None,
                           json_schema: Optional[JsonLike] = None,
                           grammar: Optional[GrammarLike] = None,
                           structural_tag: Optional[JsonLike] = None,
                           eager: bool = False) -> pb.CreateSessionRequest:
    """A CreateSession at ``index_id``, or at ``tokenizer`` + one constraint (as
    ``compile_request``) compiled in the same call."""
    if index_id is not None:
        return pb.CreateSessionRequest(index_id=index_id)
    if tokenizer is not None:
        return pb.CreateSessionRequest(compile=compile_request(
            tokenizer, regex=regex, json_schema=json_schema, grammar=grammar,
            structural_tag=structural_tag, eager=eager))
    raise ValueError("give index_id= or tokenizer= with a constraint")


# A packed mask: rows of little-endian uint32 words.
MaskArray = npt.NDArray[np.uint32]


def mask_view(data: bytes, rows: int, words_per_row: int) -> MaskArray:
    """(rows, words_per_row) read-only uint32 view of packed mask bytes (no copy)."""
    if words_per_row == 0 or rows == 0:
        return np.zeros((rows, words_per_row), dtype=np.uint32)
    return np.frombuffer(data, dtype="<u4", count=rows * words_per_row).reshape(rows, words_per_row)


@dataclasses.dataclass(frozen=True)
class StepReply:
    """A Step (or StepStream message) reply.

    ``masks`` is a read-only (entries, words_per_row) uint32 view of the reply's
    mask bytes; row i belongs to entries[i] and is all zero when
    ``results[i].status.code`` is not 0. ``results`` are the protobuf StepResults
    (status, accepting, finished, forced, num_tokens).
    """

    results: Sequence[pb.StepResult]
    masks: MaskArray
    words_per_row: int

    @staticmethod
    def from_proto(resp: pb.StepResponse) -> "StepReply":
        return StepReply(resp.results, mask_view(resp.masks, len(resp.results), resp.words_per_row),
                         resp.words_per_row)

    def ok(self, i: int) -> bool:
        return self.results[i].status.code == 0

    def raise_for_status(self) -> "StepReply":
        """Raises MaskdError for the first failed entry; returns self otherwise."""
        for i, r in enumerate(self.results):
            if r.status.code != 0:
                raise MaskdError(status_code(r.status.code), r.status.message, entry=i)
        return self


@dataclasses.dataclass(frozen=True)
class MaskReply:
    """A Mask reply: ``mask`` is a read-only (words_per_row,) uint32 view;
    ``min_bytes_to_finish``: fewest bytes still needed to reach an end (0 when accepting)."""

    mask: MaskArray
    words_per_row: int
    accepting: bool
    finished: bool
    forced: bytes
    min_bytes_to_finish: int

    @staticmethod
    def from_proto(resp: pb.MaskResponse) -> "MaskReply":
        return MaskReply(mask_view(resp.mask, 1, resp.words_per_row).reshape(-1), resp.words_per_row,
                         resp.accepting, resp.finished, resp.forced, resp.min_bytes_to_finish)
