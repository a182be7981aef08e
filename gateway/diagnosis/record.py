"""What the diagnosis record keeps of one request: who asked, under which cache scope, the shape of
its prompt (never its text), what it reused and where it was routed."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvgate.gateway.diagnosis.causes import Diagnosis
from kvgate.gateway.diagnosis.shape import Shape

_OVERHEAD = 1200  # bytes of a record beyond its arrays, hashes and strings: its objects, index entries


@dataclass(frozen=True, slots=True)
class Scope:
    """The cache scope of a request within its tenant: the model, the adapter, the keyed salt of its
    own namespace (the tenant's salt with the client's ``cache_salt``) and of a shared namespace
    (empty: none). Two requests share cached blocks only under one scope."""

    model: str
    adapter: str = ""
    salt: str = ""
    namespace: str = ""

    def differences(self, other: Scope) -> tuple[str, ...]:
        """The parts of the scope that differ, by the names a user sets them with."""
        parts = (
            ("model", self.model, other.model),
            ("adapter", self.adapter, other.adapter),
            ("cache_salt", self.salt, other.salt),
            ("namespace", self.namespace, other.namespace),
        )
        return tuple(name for name, mine, theirs in parts if mine != theirs)


@dataclass(frozen=True, slots=True)
class WorkerMark:
    """A worker as the gateway saw it at one moment: its incarnation, whether it took requests, and
    its eviction counters (blocks dropped at TTL expiry and to make room; counted per epoch)."""

    worker: str
    epoch: int
    live: bool = True
    evicted_ttl_blocks: int = 0
    evicted_pressure_blocks: int = 0


@dataclass(frozen=True, slots=True)
class RouteNote:
    """The routing decision of a request: the worker chosen, why, the tokens it predicted cached
    there, and the worker the index showed holding the longest prefix (None: none held any), with
    its tokens. ``degraded``: the index was unavailable (routed by load alone); ``attempts``: workers
    tried (more than 1: the first choice failed)."""

    worker: str
    reason: str
    predicted_cached_tokens: int
    best_holder: str | None = None
    best_holder_tokens: int = 0
    degraded: bool = False
    attempts: int = 1


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request. ``at_s``: when it finished (wall clock); ``chunk_hashes``: its chain
    (16 bytes per full chunk, concatenated); ``served``: its worker when it finished (None: not
    known); ``diagnosis``: made when it finished, against the requests recorded before it."""

    request_id: str
    tenant: str
    scope: Scope
    at_s: float
    prompt_tokens: int
    cached_tokens: int
    chunk_hashes: bytes
    shape: Shape
    route: RouteNote
    served: WorkerMark | None = None
    diagnosis: Diagnosis | None = field(default=None, compare=False)

    @property
    def nbytes(self) -> int:
        """An estimate of the memory the record holds, its diagnosis included (what the record's byte
        cap counts); the same for the record's whole life (it is immutable)."""
        diagnosis = self.diagnosis.nbytes if self.diagnosis else 0
        strings = len(self.request_id) + len(self.tenant) + len(self.scope.salt) + len(self.scope.namespace)
        return _OVERHEAD + self.shape.nbytes + len(self.chunk_hashes) + strings + diagnosis
