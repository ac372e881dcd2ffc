from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SchemaRoute(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEMA_ROUTE_AUTO: _ClassVar[SchemaRoute]
    SCHEMA_ROUTE_REGEX: _ClassVar[SchemaRoute]
    SCHEMA_ROUTE_GRAMMAR: _ClassVar[SchemaRoute]

class IndexState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INDEX_STATE_UNSPECIFIED: _ClassVar[IndexState]
    INDEX_STATE_COMPILING: _ClassVar[IndexState]
    INDEX_STATE_READY: _ClassVar[IndexState]
    INDEX_STATE_FAILED: _ClassVar[IndexState]
SCHEMA_ROUTE_AUTO: SchemaRoute
SCHEMA_ROUTE_REGEX: SchemaRoute
SCHEMA_ROUTE_GRAMMAR: SchemaRoute
INDEX_STATE_UNSPECIFIED: IndexState
INDEX_STATE_COMPILING: IndexState
INDEX_STATE_READY: IndexState
INDEX_STATE_FAILED: IndexState

class Status(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class PingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PingResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("pid", "rss_bytes", "sessions_active", "indexes", "cache_bytes", "uptime_seconds", "version")
    PID_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    CACHE_BYTES_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    pid: int
    rss_bytes: int
    sessions_active: int
    indexes: int
    cache_bytes: int
    uptime_seconds: float
    version: str
    def __init__(self, pid: _Optional[int] = ..., rss_bytes: _Optional[int] = ..., sessions_active: _Optional[int] = ..., indexes: _Optional[int] = ..., cache_bytes: _Optional[int] = ..., uptime_seconds: _Optional[float] = ..., version: _Optional[str] = ...) -> None: ...

class Tokenizer(_message.Message):
    __slots__ = ("name", "content_hash", "vocab_size", "num_tokens", "eos_ids", "kind", "source")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EOS_IDS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    content_hash: str
    vocab_size: int
    num_tokens: int
    eos_ids: _containers.RepeatedScalarFieldContainer[int]
    kind: str
    source: str
    def __init__(self, name: _Optional[str] = ..., content_hash: _Optional[str] = ..., vocab_size: _Optional[int] = ..., num_tokens: _Optional[int] = ..., eos_ids: _Optional[_Iterable[int]] = ..., kind: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class ListTokenizersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTokenizersResponse(_message.Message):
    __slots__ = ("tokenizers",)
    TOKENIZERS_FIELD_NUMBER: _ClassVar[int]
    tokenizers: _containers.RepeatedCompositeFieldContainer[Tokenizer]
    def __init__(self, tokenizers: _Optional[_Iterable[_Union[Tokenizer, _Mapping]]] = ...) -> None: ...

class RegisterTokenizerRequest(_message.Message):
    __slots__ = ("name", "tokenizer_json", "tokenizer_config_json", "vocab_size", "eos_ids")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_JSON_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    EOS_IDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    tokenizer_json: bytes
    tokenizer_config_json: bytes
    vocab_size: int
    eos_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., tokenizer_json: _Optional[bytes] = ..., tokenizer_config_json: _Optional[bytes] = ..., vocab_size: _Optional[int] = ..., eos_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class RegisterTokenizerResponse(_message.Message):
    __slots__ = ("tokenizer",)
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    tokenizer: Tokenizer
    def __init__(self, tokenizer: _Optional[_Union[Tokenizer, _Mapping]] = ...) -> None: ...

class DetokenizeRequest(_message.Message):
    __slots__ = ("tokenizer", "tokens", "include_special")
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SPECIAL_FIELD_NUMBER: _ClassVar[int]
    tokenizer: str
    tokens: _containers.RepeatedScalarFieldContainer[int]
    include_special: bool
    def __init__(self, tokenizer: _Optional[str] = ..., tokens: _Optional[_Iterable[int]] = ..., include_special: _Optional[bool] = ...) -> None: ...

class DetokenizeResponse(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: bytes
    def __init__(self, text: _Optional[bytes] = ...) -> None: ...

class CompileOptions(_message.Message):
    __slots__ = ("eager", "timeout_ms", "schema_route", "any_property_order")
    EAGER_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_ROUTE_FIELD_NUMBER: _ClassVar[int]
    ANY_PROPERTY_ORDER_FIELD_NUMBER: _ClassVar[int]
    eager: bool
    timeout_ms: int
    schema_route: SchemaRoute
    any_property_order: bool
    def __init__(self, eager: _Optional[bool] = ..., timeout_ms: _Optional[int] = ..., schema_route: _Optional[_Union[SchemaRoute, str]] = ..., any_property_order: _Optional[bool] = ...) -> None: ...

class Grammar(_message.Message):
    __slots__ = ("format", "text")
    class Format(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        FORMAT_UNSPECIFIED: _ClassVar[Grammar.Format]
        FORMAT_LARK: _ClassVar[Grammar.Format]
        FORMAT_GBNF: _ClassVar[Grammar.Format]
        FORMAT_EBNF: _ClassVar[Grammar.Format]
    FORMAT_UNSPECIFIED: Grammar.Format
    FORMAT_LARK: Grammar.Format
    FORMAT_GBNF: Grammar.Format
    FORMAT_EBNF: Grammar.Format
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    format: Grammar.Format
    text: str
    def __init__(self, format: _Optional[_Union[Grammar.Format, str]] = ..., text: _Optional[str] = ...) -> None: ...

class CompileRequest(_message.Message):
    __slots__ = ("tokenizer", "regex", "json_schema", "grammar", "structural_tag", "options", "wait")
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    GRAMMAR_FIELD_NUMBER: _ClassVar[int]
    STRUCTURAL_TAG_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    tokenizer: str
    regex: str
    json_schema: str
    grammar: Grammar
    structural_tag: str
    options: CompileOptions
    wait: bool
    def __init__(self, tokenizer: _Optional[str] = ..., regex: _Optional[str] = ..., json_schema: _Optional[str] = ..., grammar: _Optional[_Union[Grammar, _Mapping]] = ..., structural_tag: _Optional[str] = ..., options: _Optional[_Union[CompileOptions, _Mapping]] = ..., wait: _Optional[bool] = ...) -> None: ...

class CompileResponse(_message.Message):
    __slots__ = ("index_id", "state", "tokenizer", "dfa_states", "memory_bytes", "queue_ms", "compile_ms", "cache_hit", "vocab_size", "words_per_row", "route")
    INDEX_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TOKENIZER_FIELD_NUMBER: _ClassVar[int]
    DFA_STATES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    QUEUE_MS_FIELD_NUMBER: _ClassVar[int]
    COMPILE_MS_FIELD_NUMBER: _ClassVar[int]
    CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    WORDS_PER_ROW_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    index_id: str
    state: IndexState
    tokenizer: str
    dfa_states: int
    memory_bytes: int
    queue_ms: float
    compile_ms: float
    cache_hit: bool
    vocab_size: int
    words_per_row: int
    route: str
    def __init__(self, index_id: _Optional[str] = ..., state: _Optional[_Union[IndexState, str]] = ..., tokenizer: _Optional[str] = ..., dfa_states: _Optional[int] = ..., memory_bytes: _Optional[int] = ..., queue_ms: _Optional[float] = ..., compile_ms: _Optional[float] = ..., cache_hit: _Optional[bool] = ..., vocab_size: _Optional[int] = ..., words_per_row: _Optional[int] = ..., route: _Optional[str] = ...) -> None: ...

class GetIndexRequest(_message.Message):
    __slots__ = ("index_id", "wait")
    INDEX_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    index_id: str
    wait: bool
    def __init__(self, index_id: _Optional[str] = ..., wait: _Optional[bool] = ...) -> None: ...

class CancelCompileRequest(_message.Message):
    __slots__ = ("index_id",)
    INDEX_ID_FIELD_NUMBER: _ClassVar[int]
    index_id: str
    def __init__(self, index_id: _Optional[str] = ...) -> None: ...

class CancelCompileResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    def __init__(self, cancelled: _Optional[bool] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("index_id", "compile")
    INDEX_ID_FIELD_NUMBER: _ClassVar[int]
    COMPILE_FIELD_NUMBER: _ClassVar[int]
    index_id: str
    compile: CompileRequest
    def __init__(self, index_id: _Optional[str] = ..., compile: _Optional[_Union[CompileRequest, _Mapping]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ("session_id", "index_id", "vocab_size", "words_per_row")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_ID_FIELD_NUMBER: _ClassVar[int]
    VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    WORDS_PER_ROW_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    index_id: str
    vocab_size: int
    words_per_row: int
    def __init__(self, session_id: _Optional[int] = ..., index_id: _Optional[str] = ..., vocab_size: _Optional[int] = ..., words_per_row: _Optional[int] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    def __init__(self, session_id: _Optional[int] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ForkSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    def __init__(self, session_id: _Optional[int] = ...) -> None: ...

class ForkSessionResponse(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    def __init__(self, session_id: _Optional[int] = ...) -> None: ...

class RollbackRequest(_message.Message):
    __slots__ = ("session_id", "num_tokens")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    num_tokens: int
    def __init__(self, session_id: _Optional[int] = ..., num_tokens: _Optional[int] = ...) -> None: ...

class RollbackResponse(_message.Message):
    __slots__ = ("num_tokens",)
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    num_tokens: int
    def __init__(self, num_tokens: _Optional[int] = ...) -> None: ...

class StepEntry(_message.Message):
    __slots__ = ("session_id", "rollback", "tokens", "max_tokens_left")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_LEFT_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    rollback: int
    tokens: _containers.RepeatedScalarFieldContainer[int]
    max_tokens_left: int
    def __init__(self, session_id: _Optional[int] = ..., rollback: _Optional[int] = ..., tokens: _Optional[_Iterable[int]] = ..., max_tokens_left: _Optional[int] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("entries", "words_per_row")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    WORDS_PER_ROW_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[StepEntry]
    words_per_row: int
    def __init__(self, entries: _Optional[_Iterable[_Union[StepEntry, _Mapping]]] = ..., words_per_row: _Optional[int] = ...) -> None: ...

class StepResult(_message.Message):
    __slots__ = ("status", "accepting", "finished", "forced", "num_tokens", "min_bytes_to_finish")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTING_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    FORCED_FIELD_NUMBER: _ClassVar[int]
    NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_TO_FINISH_FIELD_NUMBER: _ClassVar[int]
    status: Status
    accepting: bool
    finished: bool
    forced: bytes
    num_tokens: int
    min_bytes_to_finish: int
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., accepting: _Optional[bool] = ..., finished: _Optional[bool] = ..., forced: _Optional[bytes] = ..., num_tokens: _Optional[int] = ..., min_bytes_to_finish: _Optional[int] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ("results", "masks", "words_per_row")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    MASKS_FIELD_NUMBER: _ClassVar[int]
    WORDS_PER_ROW_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[StepResult]
    masks: bytes
    words_per_row: int
    def __init__(self, results: _Optional[_Iterable[_Union[StepResult, _Mapping]]] = ..., masks: _Optional[bytes] = ..., words_per_row: _Optional[int] = ...) -> None: ...

class MaskRequest(_message.Message):
    __slots__ = ("index_id", "tokens", "words_per_row", "max_tokens_left")
    INDEX_ID_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    WORDS_PER_ROW_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_LEFT_FIELD_NUMBER: _ClassVar[int]
    index_id: str
    tokens: _containers.RepeatedScalarFieldContainer[int]
    words_per_row: int
    max_tokens_left: int
    def __init__(self, index_id: _Optional[str] = ..., tokens: _Optional[_Iterable[int]] = ..., words_per_row: _Optional[int] = ..., max_tokens_left: _Optional[int] = ...) -> None: ...

class MaskResponse(_message.Message):
    __slots__ = ("mask", "words_per_row", "accepting", "finished", "forced", "min_bytes_to_finish")
    MASK_FIELD_NUMBER: _ClassVar[int]
    WORDS_PER_ROW_FIELD_NUMBER: _ClassVar[int]
    ACCEPTING_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    FORCED_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_TO_FINISH_FIELD_NUMBER: _ClassVar[int]
    mask: bytes
    words_per_row: int
    accepting: bool
    finished: bool
    forced: bytes
    min_bytes_to_finish: int
    def __init__(self, mask: _Optional[bytes] = ..., words_per_row: _Optional[int] = ..., accepting: _Optional[bool] = ..., finished: _Optional[bool] = ..., forced: _Optional[bytes] = ..., min_bytes_to_finish: _Optional[int] = ...) -> None: ...
