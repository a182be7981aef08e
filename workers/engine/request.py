"""``EngineRequest``: one generation request as the engine takes it (tokenized, routed, validated)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvgate.proto.hashing import as_token_array
from kvgate.proto.sampling import CacheHint, SamplingParams


@dataclass(frozen=True, slots=True, eq=False)
class EngineRequest:
    """What to generate from. Immutable; validated on construction (ValueError names the field).

    ``request_id``: unique among the engine's in-flight requests, never empty. ``prompt_ids``: the
    prompt's token ids, stored as a read-only uint32 ``[n]`` copy, ``n >= 1``. ``cache_salt`` and
    ``adapter_id`` enter the hash root (different salts never share cached blocks). ``cache_hint``:
    keep the leading tokens cached longer (None: the default TTL). ``predicted_cached_tokens``: the
    router's prediction, counted against the actual number for the router's accuracy (None: none).
    ``shared_salt`` / ``shared_tokens``: the first ``shared_tokens`` prompt tokens hash under the shared
    namespace's salt instead (see :mod:`kvgate.proto.chain`; 0: none). ``background``: a prefill run
    ahead of demand (a cache warm-up): the scheduler gives it only the step budget that no other
    request takes, and preempts it first (see :mod:`.scheduler`).
    """

    request_id: str
    prompt_ids: np.ndarray
    sampling: SamplingParams = field(default_factory=SamplingParams)
    cache_salt: str = ""
    adapter_id: str = ""
    cache_hint: CacheHint | None = None
    predicted_cached_tokens: int | None = None
    shared_salt: str = ""
    shared_tokens: int = 0
    background: bool = False

    def __post_init__(self) -> None:
        if not self.request_id:
            raise ValueError("request_id must not be empty")
        ids = np.array(as_token_array(self.prompt_ids), copy=True)
        if ids.size == 0:
            raise ValueError("prompt_ids must hold at least one token")
        ids.flags.writeable = False
        object.__setattr__(self, "prompt_ids", ids)
        if not 0 <= self.shared_tokens <= ids.size or (self.shared_tokens and not self.shared_salt):
            raise ValueError(f"shared_tokens must lie in [0, {ids.size}] and come with a shared_salt")
        if self.predicted_cached_tokens is not None and self.predicted_cached_tokens < 0:
            raise ValueError(f"predicted_cached_tokens must be >= 0, got {self.predicted_cached_tokens}")

    @property
    def num_prompt_tokens(self) -> int:
        return int(self.prompt_ids.size)
