from kvgate.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GenerateRequest(_message.Message):
    __slots__ = ("request_id", "prompt_token_ids", "sampling", "cache_salt", "adapter_id", "cache_hint", "predicted_cached_tokens", "shared_salt", "shared_tokens", "background", "kv_source")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    CACHE_SALT_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_ID_FIELD_NUMBER: _ClassVar[int]
    CACHE_HINT_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SHARED_SALT_FIELD_NUMBER: _ClassVar[int]
    SHARED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    KV_SOURCE_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    sampling: _common_pb2.SamplingParams
    cache_salt: str
    adapter_id: str
    cache_hint: _common_pb2.CacheHint
    predicted_cached_tokens: int
    shared_salt: str
    shared_tokens: int
    background: bool
    kv_source: KVSource
    def __init__(self, request_id: _Optional[str] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., sampling: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ..., cache_salt: _Optional[str] = ..., adapter_id: _Optional[str] = ..., cache_hint: _Optional[_Union[_common_pb2.CacheHint, _Mapping]] = ..., predicted_cached_tokens: _Optional[int] = ..., shared_salt: _Optional[str] = ..., shared_tokens: _Optional[int] = ..., background: _Optional[bool] = ..., kv_source: _Optional[_Union[KVSource, _Mapping]] = ...) -> None: ...

class KVSource(_message.Message):
    __slots__ = ("worker_id", "address", "tokens")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    address: str
    tokens: int
    def __init__(self, worker_id: _Optional[str] = ..., address: _Optional[str] = ..., tokens: _Optional[int] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("tokens", "final", "choice_end")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    CHOICE_END_FIELD_NUMBER: _ClassVar[int]
    tokens: TokenBatch
    final: FinalResult
    choice_end: ChoiceEnd
    def __init__(self, tokens: _Optional[_Union[TokenBatch, _Mapping]] = ..., final: _Optional[_Union[FinalResult, _Mapping]] = ..., choice_end: _Optional[_Union[ChoiceEnd, _Mapping]] = ...) -> None: ...

class TokenBatch(_message.Message):
    __slots__ = ("token_ids", "index", "logprobs", "prompt_logprobs")
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    index: int
    logprobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TokenLogprobs]
    prompt_logprobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TokenLogprobs]
    def __init__(self, token_ids: _Optional[_Iterable[int]] = ..., index: _Optional[int] = ..., logprobs: _Optional[_Iterable[_Union[_common_pb2.TokenLogprobs, _Mapping]]] = ..., prompt_logprobs: _Optional[_Iterable[_Union[_common_pb2.TokenLogprobs, _Mapping]]] = ...) -> None: ...

class ChoiceEnd(_message.Message):
    __slots__ = ("index", "finish_reason", "matched_stop", "completion_tokens")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    MATCHED_STOP_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    index: int
    finish_reason: _common_pb2.FinishReason
    matched_stop: str
    completion_tokens: int
    def __init__(self, index: _Optional[int] = ..., finish_reason: _Optional[_Union[_common_pb2.FinishReason, str]] = ..., matched_stop: _Optional[str] = ..., completion_tokens: _Optional[int] = ...) -> None: ...

class FinalResult(_message.Message):
    __slots__ = ("finish_reason", "usage", "matched_stop", "error")
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    MATCHED_STOP_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    finish_reason: _common_pb2.FinishReason
    usage: _common_pb2.Usage
    matched_stop: str
    error: str
    def __init__(self, finish_reason: _Optional[_Union[_common_pb2.FinishReason, str]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ..., matched_stop: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class AbortRequest(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    def __init__(self, request_id: _Optional[str] = ...) -> None: ...

class AbortResponse(_message.Message):
    __slots__ = ("aborted",)
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    aborted: bool
    def __init__(self, aborted: _Optional[bool] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Evictions(_message.Message):
    __slots__ = ("ttl", "pressure", "reset")
    TTL_FIELD_NUMBER: _ClassVar[int]
    PRESSURE_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    ttl: int
    pressure: int
    reset: int
    def __init__(self, ttl: _Optional[int] = ..., pressure: _Optional[int] = ..., reset: _Optional[int] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("info", "load", "requests_total", "finished_stop_total", "finished_length_total", "finished_abort_total", "finished_error_total", "prompt_tokens_total", "cached_tokens_total", "cached_gpu_tokens_total", "cached_cpu_tokens_total", "completion_tokens_total", "predicted_cached_tokens_total", "actual_cached_tokens_of_predicted_total", "preemptions_total", "gpu_evictions", "cpu_evictions", "offloaded_blocks_total", "swapped_in_blocks_total", "gpu_cached_blocks", "last_event_seq", "started_at_ms", "now_ms", "kv_imported_blocks_total", "kv_imported_tokens_total", "kv_fetch_failures_total", "kv_exported_blocks_total")
    INFO_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    FINISHED_STOP_TOTAL_FIELD_NUMBER: _ClassVar[int]
    FINISHED_LENGTH_TOTAL_FIELD_NUMBER: _ClassVar[int]
    FINISHED_ABORT_TOTAL_FIELD_NUMBER: _ClassVar[int]
    FINISHED_ERROR_TOTAL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CACHED_GPU_TOKENS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CACHED_CPU_TOKENS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_CACHED_TOKENS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ACTUAL_CACHED_TOKENS_OF_PREDICTED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIONS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    GPU_EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    CPU_EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    OFFLOADED_BLOCKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SWAPPED_IN_BLOCKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    GPU_CACHED_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    KV_IMPORTED_BLOCKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    KV_IMPORTED_TOKENS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    KV_FETCH_FAILURES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    KV_EXPORTED_BLOCKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    info: _common_pb2.WorkerInfo
    load: _common_pb2.WorkerLoad
    requests_total: int
    finished_stop_total: int
    finished_length_total: int
    finished_abort_total: int
    finished_error_total: int
    prompt_tokens_total: int
    cached_tokens_total: int
    cached_gpu_tokens_total: int
    cached_cpu_tokens_total: int
    completion_tokens_total: int
    predicted_cached_tokens_total: int
    actual_cached_tokens_of_predicted_total: int
    preemptions_total: int
    gpu_evictions: Evictions
    cpu_evictions: Evictions
    offloaded_blocks_total: int
    swapped_in_blocks_total: int
    gpu_cached_blocks: int
    last_event_seq: int
    started_at_ms: int
    now_ms: int
    kv_imported_blocks_total: int
    kv_imported_tokens_total: int
    kv_fetch_failures_total: int
    kv_exported_blocks_total: int
    def __init__(self, info: _Optional[_Union[_common_pb2.WorkerInfo, _Mapping]] = ..., load: _Optional[_Union[_common_pb2.WorkerLoad, _Mapping]] = ..., requests_total: _Optional[int] = ..., finished_stop_total: _Optional[int] = ..., finished_length_total: _Optional[int] = ..., finished_abort_total: _Optional[int] = ..., finished_error_total: _Optional[int] = ..., prompt_tokens_total: _Optional[int] = ..., cached_tokens_total: _Optional[int] = ..., cached_gpu_tokens_total: _Optional[int] = ..., cached_cpu_tokens_total: _Optional[int] = ..., completion_tokens_total: _Optional[int] = ..., predicted_cached_tokens_total: _Optional[int] = ..., actual_cached_tokens_of_predicted_total: _Optional[int] = ..., preemptions_total: _Optional[int] = ..., gpu_evictions: _Optional[_Union[Evictions, _Mapping]] = ..., cpu_evictions: _Optional[_Union[Evictions, _Mapping]] = ..., offloaded_blocks_total: _Optional[int] = ..., swapped_in_blocks_total: _Optional[int] = ..., gpu_cached_blocks: _Optional[int] = ..., last_event_seq: _Optional[int] = ..., started_at_ms: _Optional[int] = ..., now_ms: _Optional[int] = ..., kv_imported_blocks_total: _Optional[int] = ..., kv_imported_tokens_total: _Optional[int] = ..., kv_fetch_failures_total: _Optional[int] = ..., kv_exported_blocks_total: _Optional[int] = ...) -> None: ...

class SubscribeEventsRequest(_message.Message):
    __slots__ = ("admissions",)
    ADMISSIONS_FIELD_NUMBER: _ClassVar[int]
    admissions: bool
    def __init__(self, admissions: _Optional[bool] = ...) -> None: ...

class EventStreamMessage(_message.Message):
    __slots__ = ("snapshot", "batch", "load", "admission")
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    ADMISSION_FIELD_NUMBER: _ClassVar[int]
    snapshot: _common_pb2.Snapshot
    batch: _common_pb2.EventBatch
    load: _common_pb2.WorkerLoad
    admission: _common_pb2.Admission
    def __init__(self, snapshot: _Optional[_Union[_common_pb2.Snapshot, _Mapping]] = ..., batch: _Optional[_Union[_common_pb2.EventBatch, _Mapping]] = ..., load: _Optional[_Union[_common_pb2.WorkerLoad, _Mapping]] = ..., admission: _Optional[_Union[_common_pb2.Admission, _Mapping]] = ...) -> None: ...

class ExportKVRequest(_message.Message):
    __slots__ = ("prompt_token_ids", "cache_salt", "adapter_id", "shared_salt", "shared_tokens", "max_tokens", "fingerprint")
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    CACHE_SALT_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_ID_FIELD_NUMBER: _ClassVar[int]
    SHARED_SALT_FIELD_NUMBER: _ClassVar[int]
    SHARED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    cache_salt: str
    adapter_id: str
    shared_salt: str
    shared_tokens: int
    max_tokens: int
    fingerprint: str
    def __init__(self, prompt_token_ids: _Optional[_Iterable[int]] = ..., cache_salt: _Optional[str] = ..., adapter_id: _Optional[str] = ..., shared_salt: _Optional[str] = ..., shared_tokens: _Optional[int] = ..., max_tokens: _Optional[int] = ..., fingerprint: _Optional[str] = ...) -> None: ...

class KVBlockData(_message.Message):
    __slots__ = ("index", "block_hash", "data", "mac")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    BLOCK_HASH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    index: int
    block_hash: int
    data: bytes
    mac: bytes
    def __init__(self, index: _Optional[int] = ..., block_hash: _Optional[int] = ..., data: _Optional[bytes] = ..., mac: _Optional[bytes] = ...) -> None: ...
