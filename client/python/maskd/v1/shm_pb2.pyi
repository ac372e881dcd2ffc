from maskd.v1 import maskd_pb2 as _maskd_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REGION_KIND_UNSPECIFIED: _ClassVar[RegionKind]
    REGION_KIND_SYSTEM: _ClassVar[RegionKind]
    REGION_KIND_CUDA: _ClassVar[RegionKind]

class LogitsDtype(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOGITS_DTYPE_UNSPECIFIED: _ClassVar[LogitsDtype]
    LOGITS_DTYPE_FP32: _ClassVar[LogitsDtype]
    LOGITS_DTYPE_FP16: _ClassVar[LogitsDtype]
    LOGITS_DTYPE_BF16: _ClassVar[LogitsDtype]
REGION_KIND_UNSPECIFIED: RegionKind
REGION_KIND_SYSTEM: RegionKind
REGION_KIND_CUDA: RegionKind
LOGITS_DTYPE_UNSPECIFIED: LogitsDtype
LOGITS_DTYPE_FP32: LogitsDtype
LOGITS_DTYPE_FP16: LogitsDtype
LOGITS_DTYPE_BF16: LogitsDtype

class RegisterSystemRegionRequest(_message.Message):
    __slots__ = ("name", "key", "offset", "byte_size")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    BYTE_SIZE_FIELD_NUMBER: _ClassVar[int]
    name: str
    key: str
    offset: int
    byte_size: int
    def __init__(self, name: _Optional[str] = ..., key: _Optional[str] = ..., offset: _Optional[int] = ..., byte_size: _Optional[int] = ...) -> None: ...

class RegisterSystemRegionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RegisterCudaRegionRequest(_message.Message):
    __slots__ = ("name", "raw_handle", "device_id", "offset", "byte_size")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RAW_HANDLE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    BYTE_SIZE_FIELD_NUMBER: _ClassVar[int]
    name: str
    raw_handle: bytes
    device_id: int
    offset: int
    byte_size: int
    def __init__(self, name: _Optional[str] = ..., raw_handle: _Optional[bytes] = ..., device_id: _Optional[int] = ..., offset: _Optional[int] = ..., byte_size: _Optional[int] = ...) -> None: ...

class RegisterCudaRegionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRegionsRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RegionStatus(_message.Message):
    __slots__ = ("name", "kind", "byte_size", "device_id", "calls_in_flight")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    BYTE_SIZE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    CALLS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: RegionKind
    byte_size: int
    device_id: int
    calls_in_flight: int
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[RegionKind, str]] = ..., byte_size: _Optional[int] = ..., device_id: _Optional[int] = ..., calls_in_flight: _Optional[int] = ...) -> None: ...

class ListRegionsResponse(_message.Message):
    __slots__ = ("regions",)
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    regions: _containers.RepeatedCompositeFieldContainer[RegionStatus]
    def __init__(self, regions: _Optional[_Iterable[_Union[RegionStatus, _Mapping]]] = ...) -> None: ...

class UnregisterRegionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class UnregisterRegionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MasksTarget(_message.Message):
    __slots__ = ("region", "offset")
    REGION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    region: str
    offset: int
    def __init__(self, region: _Optional[str] = ..., offset: _Optional[int] = ...) -> None: ...

class LogitsTarget(_message.Message):
    __slots__ = ("region", "offset", "dtype", "rows", "vocab", "row_stride", "row_map", "wait_event")
    REGION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    VOCAB_FIELD_NUMBER: _ClassVar[int]
    ROW_STRIDE_FIELD_NUMBER: _ClassVar[int]
    ROW_MAP_FIELD_NUMBER: _ClassVar[int]
    WAIT_EVENT_FIELD_NUMBER: _ClassVar[int]
    region: str
    offset: int
    dtype: LogitsDtype
    rows: int
    vocab: int
    row_stride: int
    row_map: _containers.RepeatedScalarFieldContainer[int]
    wait_event: bytes
    def __init__(self, region: _Optional[str] = ..., offset: _Optional[int] = ..., dtype: _Optional[_Union[LogitsDtype, str]] = ..., rows: _Optional[int] = ..., vocab: _Optional[int] = ..., row_stride: _Optional[int] = ..., row_map: _Optional[_Iterable[int]] = ..., wait_event: _Optional[bytes] = ...) -> None: ...

class StepInRegionRequest(_message.Message):
    __slots__ = ("entries", "masks", "logits")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MASKS_FIELD_NUMBER: _ClassVar[int]
    LOGITS_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[_maskd_pb2.StepEntry]
    masks: MasksTarget
    logits: LogitsTarget
    def __init__(self, entries: _Optional[_Iterable[_Union[_maskd_pb2.StepEntry, _Mapping]]] = ..., masks: _Optional[_Union[MasksTarget, _Mapping]] = ..., logits: _Optional[_Union[LogitsTarget, _Mapping]] = ...) -> None: ...

class StepInRegionResponse(_message.Message):
    __slots__ = ("results", "words_per_row")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    WORDS_PER_ROW_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_maskd_pb2.StepResult]
    words_per_row: int
    def __init__(self, results: _Optional[_Iterable[_Union[_maskd_pb2.StepResult, _Mapping]]] = ..., words_per_row: _Optional[int] = ...) -> None: ...
