"""The time model of a simulated worker: how long a prefill and a decode take.

A worker runs one prefill at a time, first come first served (its queue is the prefill queue); the
prefill of a request costs its recomputed tokens at ``prefill_tokens_per_s``, its CPU-tier chunks at
``swap_in_tokens_per_s``, and one decode step for the first token. Decoding overlaps the next prefills
(chunked prefill batches them together; a decode step of a few sequences is memory-bound and adds
~1 % to a prefill step's compute, which is ignored), so decodes do not delay TTFT here; they only show
in the load figures (``running_seqs``) and hold KV memory.
Cost is linear in tokens: attention's quadratic term is folded into the prefill rate, calibrated for
the trace's ~15k-token prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvgate.sim.settings import SimSettings


@dataclass(frozen=True, slots=True)
class TimeModel:
    """Seconds per unit of work (see :class:`SimSettings` for the defaults and where they come from)."""

    prefill_tokens_per_s: float
    swap_in_tokens_per_s: float
    decode_step_s: float

    @staticmethod
    def of(settings: SimSettings) -> TimeModel:
        return TimeModel(settings.prefill_tokens_per_s, settings.swap_in_tokens_per_s, settings.decode_step_s)

    def prefill_s(self, computed_tokens: int, swapped_tokens: int) -> float:
        """Prefill to first token: recompute, swap in, and one step that samples the first token."""
        return (
            computed_tokens / self.prefill_tokens_per_s
            + swapped_tokens / self.swap_in_tokens_per_s
            + self.decode_step_s
        )

    def decode_s(self, output_tokens: int) -> float:
        """The decode steps after the first token (0 for 0 or 1 output tokens)."""
        return max(output_tokens - 1, 0) * self.decode_step_s
