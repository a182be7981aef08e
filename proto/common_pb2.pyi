from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Tier(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIER_UNSPECIFIED: _ClassVar[Tier]
    TIER_GPU: _ClassVar[Tier]
    TIER_CPU: _ClassVar[Tier]

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_STOP: _ClassVar[FinishReason]
    FINISH_REASON_LENGTH: _ClassVar[FinishReason]
    FINISH_REASON_ABORT: _ClassVar[FinishReason]
    FINISH_REASON_ERROR: _ClassVar[FinishReason]

class ConstraintKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSTRAINT_KIND_UNSPECIFIED: _ClassVar[ConstraintKind]
    CONSTRAINT_KIND_JSON_SCHEMA: _ClassVar[ConstraintKind]
    CONSTRAINT_KIND_LARK: _ClassVar[ConstraintKind]

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_KIND_UNSPECIFIED: _ClassVar[EventKind]
    EVENT_KIND_STORED: _ClassVar[EventKind]
    EVENT_KIND_OFFLOADED: _ClassVar[EventKind]
    EVENT_KIND_EVICTED: _ClassVar[EventKind]
    EVENT_KIND_CLEARED: _ClassVar[EventKind]
TIER_UNSPECIFIED: Tier
TIER_GPU: Tier
TIER_CPU: Tier
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_ABORT: FinishReason
FINISH_REASON_ERROR: FinishReason
CONSTRAINT_KIND_UNSPECIFIED: ConstraintKind
CONSTRAINT_KIND_JSON_SCHEMA: ConstraintKind
CONSTRAINT_KIND_LARK: ConstraintKind
EVENT_KIND_UNSPECIFIED: EventKind
EVENT_KIND_STORED: EventKind
EVENT_KIND_OFFLOADED: EventKind
EVENT_KIND_EVICTED: EventKind
EVENT_KIND_CLEARED: EventKind

class SamplingParams(_message.Message):
    __slots__ = ("temperature", "top_p", "top_k", "seed", "max_tokens", "stop", "stop_token_ids", "ignore_eos", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias", "min_tokens", "min_p", "logprobs", "prompt_logprobs", "n", "constraint")
    class LogitBiasEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: float
        def __init__(self, key: _Optional[int] = ..., value: _Optional[float] = ...) -> None: ...
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    IGNORE_EOS_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    REPETITION_PENALTY_FIELD_NUMBER: _ClassVar[int]
    LOGIT_BIAS_FIELD_NUMBER: _ClassVar[int]
    MIN_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MIN_P_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_p: float
    top_k: int
    seed: int
    max_tokens: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    stop_token_ids: _containers.RepeatedScalarFieldContainer[int]
    ignore_eos: bool
    presence_penalty: float
    frequency_penalty: float
    repetition_penalty: float
    logit_bias: _containers.ScalarMap[int, float]
    min_tokens: int
    min_p: float
    logprobs: int
    prompt_logprobs: int
    n: int
    constraint: OutputConstraint
    def __init__(self, temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[int] = ..., seed: _Optional[int] = ..., max_tokens: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., stop_token_ids: _Optional[_Iterable[int]] = ..., ignore_eos: _Optional[bool] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., repetition_penalty: _Optional[float] = ..., logit_bias: _Optional[_Mapping[int, float]] = ..., min_tokens: _Optional[int] = ..., min_p: _Optional[float] = ..., logprobs: _Optional[int] = ..., prompt_logprobs: _Optional[int] = ..., n: _Optional[int] = ..., constraint: _Optional[_Union[OutputConstraint, _Mapping]] = ...) -> None: ...

class OutputConstraint(_message.Message):
    __slots__ = ("kind", "spec")
    KIND_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    kind: ConstraintKind
    spec: str
    def __init__(self, kind: _Optional[_Union[ConstraintKind, str]] = ..., spec: _Optional[str] = ...) -> None: ...

class TokenLogprobs(_message.Message):
    __slots__ = ("logprob", "top_token_ids", "top_logprobs")
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOP_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    logprob: float
    top_token_ids: _containers.RepeatedScalarFieldContainer[int]
    top_logprobs: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, logprob: _Optional[float] = ..., top_token_ids: _Optional[_Iterable[int]] = ..., top_logprobs: _Optional[_Iterable[float]] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "cached_tokens", "cached_gpu_tokens", "cached_cpu_tokens", "evicted_predicted_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_GPU_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_CPU_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EVICTED_PREDICTED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cached_gpu_tokens: int
    cached_cpu_tokens: int
    evicted_predicted_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ..., cached_gpu_tokens: _Optional[int] = ..., cached_cpu_tokens: _Optional[int] = ..., evicted_predicted_tokens: _Optional[int] = ...) -> None: ...

class CacheHint(_message.Message):
    __slots__ = ("pinned_prefix_tokens", "ttl_s")
    PINNED_PREFIX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    pinned_prefix_tokens: int
    ttl_s: int
    def __init__(self, pinned_prefix_tokens: _Optional[int] = ..., ttl_s: _Optional[int] = ...) -> None: ...

class KVEvent(_message.Message):
    __slots__ = ("kind", "chunk", "tier", "expires_at_ms")
    KIND_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    kind: EventKind
    chunk: bytes
    tier: Tier
    expires_at_ms: int
    def __init__(self, kind: _Optional[_Union[EventKind, str]] = ..., chunk: _Optional[bytes] = ..., tier: _Optional[_Union[Tier, str]] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class Admission(_message.Message):
    __slots__ = ("worker_id", "epoch", "pending", "load")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    epoch: int
    pending: _containers.RepeatedScalarFieldContainer[bytes]
    load: WorkerLoad
    def __init__(self, worker_id: _Optional[str] = ..., epoch: _Optional[int] = ..., pending: _Optional[_Iterable[bytes]] = ..., load: _Optional[_Union[WorkerLoad, _Mapping]] = ...) -> None: ...

class EventBatch(_message.Message):
    __slots__ = ("worker_id", "epoch", "seq", "events")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    epoch: int
    seq: int
    events: _containers.RepeatedCompositeFieldContainer[KVEvent]
    def __init__(self, worker_id: _Optional[str] = ..., epoch: _Optional[int] = ..., seq: _Optional[int] = ..., events: _Optional[_Iterable[_Union[KVEvent, _Mapping]]] = ...) -> None: ...

class Holding(_message.Message):
    __slots__ = ("chunk", "tier", "expires_at_ms")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    chunk: bytes
    tier: Tier
    expires_at_ms: int
    def __init__(self, chunk: _Optional[bytes] = ..., tier: _Optional[_Union[Tier, str]] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ("worker_id", "epoch", "seq", "holdings")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    HOLDINGS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    epoch: int
    seq: int
    holdings: _containers.RepeatedCompositeFieldContainer[Holding]
    def __init__(self, worker_id: _Optional[str] = ..., epoch: _Optional[int] = ..., seq: _Optional[int] = ..., holdings: _Optional[_Iterable[_Union[Holding, _Mapping]]] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("worker_id", "epoch", "address", "fingerprint", "model_id", "metrics_address", "node_id", "signature", "adapters", "loadable_adapters")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    METRICS_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    LOADABLE_ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    epoch: int
    address: str
    fingerprint: str
    model_id: str
    metrics_address: str
    node_id: str
    signature: str
    adapters: _containers.RepeatedScalarFieldContainer[str]
    loadable_adapters: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, worker_id: _Optional[str] = ..., epoch: _Optional[int] = ..., address: _Optional[str] = ..., fingerprint: _Optional[str] = ..., model_id: _Optional[str] = ..., metrics_address: _Optional[str] = ..., node_id: _Optional[str] = ..., signature: _Optional[str] = ..., adapters: _Optional[_Iterable[str]] = ..., loadable_adapters: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkerLoad(_message.Message):
    __slots__ = ("waiting_prefill_tokens", "running_seqs", "waiting_seqs", "gpu_blocks_total", "gpu_blocks_free", "cpu_blocks_total", "cpu_blocks_free", "gpu_blocks_cached", "evicted_ttl_blocks", "evicted_pressure_blocks", "offloaded_blocks")
    WAITING_PREFILL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_SEQS_FIELD_NUMBER: _ClassVar[int]
    WAITING_SEQS_FIELD_NUMBER: _ClassVar[int]
    GPU_BLOCKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    GPU_BLOCKS_FREE_FIELD_NUMBER: _ClassVar[int]
    CPU_BLOCKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CPU_BLOCKS_FREE_FIELD_NUMBER: _ClassVar[int]
    GPU_BLOCKS_CACHED_FIELD_NUMBER: _ClassVar[int]
    EVICTED_TTL_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    EVICTED_PRESSURE_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    OFFLOADED_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    waiting_prefill_tokens: int
    running_seqs: int
    waiting_seqs: int
    gpu_blocks_total: int
    gpu_blocks_free: int
    cpu_blocks_total: int
    cpu_blocks_free: int
    gpu_blocks_cached: int
    evicted_ttl_blocks: int
    evicted_pressure_blocks: int
    offloaded_blocks: int
    def __init__(self, waiting_prefill_tokens: _Optional[int] = ..., running_seqs: _Optional[int] = ..., waiting_seqs: _Optional[int] = ..., gpu_blocks_total: _Optional[int] = ..., gpu_blocks_free: _Optional[int] = ..., cpu_blocks_total: _Optional[int] = ..., cpu_blocks_free: _Optional[int] = ..., gpu_blocks_cached: _Optional[int] = ..., evicted_ttl_blocks: _Optional[int] = ..., evicted_pressure_blocks: _Optional[int] = ..., offloaded_blocks: _Optional[int] = ...) -> None: ...
