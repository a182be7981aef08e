from kvgate.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RouteReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROUTE_REASON_UNSPECIFIED: _ClassVar[RouteReason]
    ROUTE_REASON_CACHE_HIT: _ClassVar[RouteReason]
    ROUTE_REASON_LOAD_BALANCED: _ClassVar[RouteReason]
    ROUTE_REASON_FALLBACK: _ClassVar[RouteReason]
    ROUTE_REASON_PINNED: _ClassVar[RouteReason]
    ROUTE_REASON_LOAD_OVERRIDE: _ClassVar[RouteReason]
    ROUTE_REASON_NEW_PREFIX: _ClassVar[RouteReason]
    ROUTE_REASON_HOT_PREFIX_REPLICATED: _ClassVar[RouteReason]
ROUTE_REASON_UNSPECIFIED: RouteReason
ROUTE_REASON_CACHE_HIT: RouteReason
ROUTE_REASON_LOAD_BALANCED: RouteReason
ROUTE_REASON_FALLBACK: RouteReason
ROUTE_REASON_PINNED: RouteReason
ROUTE_REASON_LOAD_OVERRIDE: RouteReason
ROUTE_REASON_NEW_PREFIX: RouteReason
ROUTE_REASON_HOT_PREFIX_REPLICATED: RouteReason

class ChatMessage(_message.Message):
    __slots__ = ("role", "content", "cache_ttl")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CACHE_TTL_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    cache_ttl: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., cache_ttl: _Optional[str] = ...) -> None: ...

class ChatMessages(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ...) -> None: ...

class TokenIds(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class GatewayRequest(_message.Message):
    __slots__ = ("model", "prompt", "chat", "tokens", "sampling", "prompt_cache_key", "user", "cache_hint", "cache_salt", "request_id")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    CHAT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_KEY_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    CACHE_HINT_FIELD_NUMBER: _ClassVar[int]
    CACHE_SALT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    model: str
    prompt: str
    chat: ChatMessages
    tokens: TokenIds
    sampling: _common_pb2.SamplingParams
    prompt_cache_key: str
    user: str
    cache_hint: _common_pb2.CacheHint
    cache_salt: str
    request_id: str
    def __init__(self, model: _Optional[str] = ..., prompt: _Optional[str] = ..., chat: _Optional[_Union[ChatMessages, _Mapping]] = ..., tokens: _Optional[_Union[TokenIds, _Mapping]] = ..., sampling: _Optional[_Union[_common_pb2.SamplingParams, _Mapping]] = ..., prompt_cache_key: _Optional[str] = ..., user: _Optional[str] = ..., cache_hint: _Optional[_Union[_common_pb2.CacheHint, _Mapping]] = ..., cache_salt: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class GatewayResponse(_message.Message):
    __slots__ = ("delta", "final", "choice_done")
    DELTA_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    CHOICE_DONE_FIELD_NUMBER: _ClassVar[int]
    delta: Delta
    final: Final
    choice_done: ChoiceDone
    def __init__(self, delta: _Optional[_Union[Delta, _Mapping]] = ..., final: _Optional[_Union[Final, _Mapping]] = ..., choice_done: _Optional[_Union[ChoiceDone, _Mapping]] = ...) -> None: ...

class Delta(_message.Message):
    __slots__ = ("text", "token_ids", "index", "logprobs", "prompt_logprobs")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    text: str
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    index: int
    logprobs: _containers.RepeatedCompositeFieldContainer[TextLogprob]
    prompt_logprobs: _containers.RepeatedCompositeFieldContainer[TextLogprob]
    def __init__(self, text: _Optional[str] = ..., token_ids: _Optional[_Iterable[int]] = ..., index: _Optional[int] = ..., logprobs: _Optional[_Iterable[_Union[TextLogprob, _Mapping]]] = ..., prompt_logprobs: _Optional[_Iterable[_Union[TextLogprob, _Mapping]]] = ...) -> None: ...

class TextLogprob(_message.Message):
    __slots__ = ("token", "logprob", "top")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    token: str
    logprob: float
    top: _containers.RepeatedCompositeFieldContainer[TopLogprob]
    def __init__(self, token: _Optional[str] = ..., logprob: _Optional[float] = ..., top: _Optional[_Iterable[_Union[TopLogprob, _Mapping]]] = ...) -> None: ...

class TopLogprob(_message.Message):
    __slots__ = ("token", "logprob")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    token: str
    logprob: float
    def __init__(self, token: _Optional[str] = ..., logprob: _Optional[float] = ...) -> None: ...

class ChoiceDone(_message.Message):
    __slots__ = ("index", "finish_reason")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    index: int
    finish_reason: _common_pb2.FinishReason
    def __init__(self, index: _Optional[int] = ..., finish_reason: _Optional[_Union[_common_pb2.FinishReason, str]] = ...) -> None: ...

class Final(_message.Message):
    __slots__ = ("finish_reason", "usage", "worker_id", "route_reason", "predicted_cached_tokens", "request_id", "matched_stop", "error")
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTE_REASON_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MATCHED_STOP_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    finish_reason: _common_pb2.FinishReason
    usage: _common_pb2.Usage
    worker_id: str
    route_reason: RouteReason
    predicted_cached_tokens: int
    request_id: str
    matched_stop: str
    error: str
    def __init__(self, finish_reason: _Optional[_Union[_common_pb2.FinishReason, str]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ..., worker_id: _Optional[str] = ..., route_reason: _Optional[_Union[RouteReason, str]] = ..., predicted_cached_tokens: _Optional[int] = ..., request_id: _Optional[str] = ..., matched_stop: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class WorkerMatch(_message.Message):
    __slots__ = ("worker_id", "matched_chunks", "gpu_chunks", "cpu_chunks", "pending_chunks")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    MATCHED_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    GPU_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    CPU_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    PENDING_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    matched_chunks: int
    gpu_chunks: int
    cpu_chunks: int
    pending_chunks: int
    def __init__(self, worker_id: _Optional[str] = ..., matched_chunks: _Optional[int] = ..., gpu_chunks: _Optional[int] = ..., cpu_chunks: _Optional[int] = ..., pending_chunks: _Optional[int] = ...) -> None: ...

class RouteDecision(_message.Message):
    __slots__ = ("prompt_tokens", "full_chunks", "chunk_size", "matches", "chosen_worker", "reason", "predicted_cached_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FULL_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_WORKER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    full_chunks: int
    chunk_size: int
    matches: _containers.RepeatedCompositeFieldContainer[WorkerMatch]
    chosen_worker: str
    reason: RouteReason
    predicted_cached_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., full_chunks: _Optional[int] = ..., chunk_size: _Optional[int] = ..., matches: _Optional[_Iterable[_Union[WorkerMatch, _Mapping]]] = ..., chosen_worker: _Optional[str] = ..., reason: _Optional[_Union[RouteReason, str]] = ..., predicted_cached_tokens: _Optional[int] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("id", "ready_workers", "max_model_len")
    ID_FIELD_NUMBER: _ClassVar[int]
    READY_WORKERS_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_LEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    ready_workers: int
    max_model_len: int
    def __init__(self, id: _Optional[str] = ..., ready_workers: _Optional[int] = ..., max_model_len: _Optional[int] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...
