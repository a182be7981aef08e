"""How long the chunks of a request a worker took in stay pending: until its prefill queue is done.

A worker's :class:`~kvgate.proto.events.Admission` reports its load with the request counted, so
the prefill tokens waiting there, the request's own included, are the work before its chunks are
stored. A gateway that knows the prefill rate it assumes for routing turns that into seconds
(:meth:`IndexSettings.pending_ms` bounds it), so every gateway follows a long prompt's run to its
worker for as long as it is being computed, not for ``pending_ttl_s`` alone.
"""

from __future__ import annotations

from kvgate.proto.workers import WorkerLoad


def admission_wait_s(load: WorkerLoad, prefill_tokens_per_s: float) -> float:
    """Seconds until the prefill queue ``load`` reports is done at ``prefill_tokens_per_s`` (0.0 when
    the rate is not positive: no wait known, the entries live ``pending_ttl_s``)."""
    if prefill_tokens_per_s <= 0:
        return 0.0
    return max(load.waiting_prefill_tokens, 0) / prefill_tokens_per_s
