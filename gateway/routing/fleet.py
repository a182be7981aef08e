"""The live workers as the router sees them, kept between decisions: sorted ids, positions, and each
worker's queue estimate. Rebuilt only when the worker list changes; a worker whose in-flight tokens
changed is recomputed alone. A decision over a thousand workers then costs no per-worker objects."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import fmean

from kvgate.gateway.routing.cost import occupancy
from kvgate.gateway.routing.types import Candidate
from kvgate.index.types import WorkerStatus
from kvgate.proto.ids import WorkerId


@dataclass(frozen=True, slots=True)
class Fleet:
    """Candidates (without matches) sorted by worker id, their positions, ``queue_s[i]``: the
    policy's queue estimate of ``candidates[i]``, and the workers whose holdings the index does not
    follow, with their KV capacity in blocks (GPU and CPU tiers)."""

    candidates: tuple[Candidate, ...]
    position: dict[WorkerId, int]
    queue_s: tuple[float, ...]
    unfollowed: dict[WorkerId, int]
    mean_gpu_blocks: float = 0.0  # the candidates' mean GPU-tier capacity, in blocks
    occupancy: float | None = None  # the candidates' mean share of GPU blocks holding KV (None: unknown)

    @property
    def ids(self) -> tuple[WorkerId, ...]:
        return tuple(c.worker_id for c in self.candidates)

    def with_startup(self, startup_s: Mapping[WorkerId, float]) -> Fleet:
        """This fleet for one request that some workers can start only after ``startup_s[worker]``
        seconds (loading its adapter): their candidates carry it, their queue estimates include it."""
        candidates, queue_s = list(self.candidates), list(self.queue_s)
        for wid, extra in startup_s.items():
            i = self.position.get(wid)
            if i is not None and extra:
                candidates[i] = replace(candidates[i], startup_s=extra)
                queue_s[i] += extra
        return replace(self, candidates=tuple(candidates), queue_s=tuple(queue_s))


class FleetView:
    """Keeps the current :class:`Fleet`. ``queue_of`` is the policy's queue estimate; ``inflight``
    gives a worker's in-flight tokens routed at or after a time (its heartbeat's)."""

    def __init__(
        self, queue_of: Callable[[Candidate], float], inflight: Callable[[WorkerId, int], int]
    ) -> None:
        self._queue_of = queue_of
        self._inflight = inflight
        self._statuses: tuple[WorkerStatus, ...] = ()  # held, so their ids stay theirs
        self._key: tuple[int, ...] = ()
        self._dirty: set[WorkerId] = set()
        self._fleet = Fleet((), {}, (), {})

    def touch(self, worker_id: WorkerId) -> None:
        """``worker_id``'s in-flight tokens changed: recompute it at the next :meth:`current`."""
        self._dirty.add(worker_id)

    def current(self, workers: Sequence[WorkerStatus]) -> Fleet:
        """The fleet of ``workers`` (the same status objects as last time: nothing is rebuilt)."""
        key = tuple(map(id, workers))
        if key != self._key:
            self._statuses, self._key = tuple(workers), key
            self._dirty.clear()
            self._fleet = self._build(sorted(workers, key=lambda s: s.info.worker_id))
        elif self._dirty:
            self._refresh(self._dirty & self._fleet.position.keys())
            self._dirty.clear()
        return self._fleet

    def _candidate(self, status: WorkerStatus) -> Candidate:
        wid = status.info.worker_id
        return Candidate(wid, status.load, None, self._inflight(wid, status.heartbeat_at_ms))

    def _build(self, statuses: list[WorkerStatus]) -> Fleet:
        candidates = tuple(self._candidate(s) for s in statuses)
        position = {c.worker_id: i for i, c in enumerate(candidates)}
        unfollowed = {s.info.worker_id: s.load.gpu_blocks_total + s.load.cpu_blocks_total
                      for s in statuses if not s.followed}  # fmt: skip
        queue_s = tuple(self._queue_of(c) for c in candidates)
        return Fleet(
            candidates, position, queue_s, unfollowed, _mean_gpu_blocks(candidates), occupancy(candidates)
        )

    def _refresh(self, changed: set[WorkerId]) -> None:
        by_id = {s.info.worker_id: s for s in self._statuses if s.info.worker_id in changed}
        candidates, queue_s = list(self._fleet.candidates), list(self._fleet.queue_s)
        for wid, status in by_id.items():
            i = self._fleet.position[wid]
            candidates[i] = self._candidate(status)
            queue_s[i] = self._queue_of(candidates[i])
        fleet = self._fleet
        self._fleet = replace(fleet, candidates=tuple(candidates), queue_s=tuple(queue_s))


def _mean_gpu_blocks(candidates: Sequence[Candidate]) -> float:
    return fmean(c.load.gpu_blocks_total for c in candidates) if candidates else 0.0
