"""One request's generation state inside the engine: tokens, status, cache hits, timings."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import torch

from kvgate.proto.chain import ChainRoots
from kvgate.proto.sampling import FinishReason, TokenLogprob, Usage
from kvgate.workers.engine.grammar import GrammarState
from kvgate.workers.engine.logits import Processing, TokenHistory
from kvgate.workers.engine.prompt_logprobs import PromptLogprobs
from kvgate.workers.engine.request import EngineRequest
from kvgate.workers.engine.stopping import Stop, StopChecker
from kvgate.workers.kv import CachedTokens, Pin, Prompt, SeqId


class SeqStatus(Enum):
    WAITING = "waiting"  # queued, never admitted
    RUNNING = "running"  # admitted: has KV blocks
    PREEMPTED = "preempted"  # was running, blocks freed, queued again to recompute
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class RequestTimings:
    """``time.perf_counter()`` seconds of one request: arrival (``add_request``), first new token (None
    when none came), end."""

    arrival_s: float
    first_token_s: float | None
    finished_s: float

    @property
    def ttft_s(self) -> float | None:
        """Time to first token; None when the request produced none."""
        return None if self.first_token_s is None else self.first_token_s - self.arrival_s


@dataclass(slots=True, eq=False)
class Sequence:
    """Mutated by the scheduler (``status``, ``prompt``, ``cached``) and the engine (tokens, finish).

    ``token_ids``: prompt, then generated ids. ``prompt``: what the next admission starts from (the
    prompt; after a preemption, the prompt and the output so far, recomputed). ``cached``: prompt
    tokens served from cache at the first admission (None before it). ``generator``: the sequence's own
    random stream (None for greedy), so seeded output does not depend on the batch. ``eviction_mark``:
    the block manager's eviction mark when the engine took the request; ``evicted_predicted_tokens``:
    predicted cached tokens lost to evictions after that (set at the first admission). ``index``: the
    choice it samples; choices after 0 are forks of choice 0 (see ``LLMEngine``), with their own
    ``seq_id``, stopper, random stream and grammar state. ``grammar``: where the output stands in its
    constraint (None: free text); it ends the sequence once the output is a complete match.
    ``prompt_logprobs``: the prompt's own scores when the request asks for them (choice 0 only).
    """

    request: EngineRequest
    seq_id: SeqId
    root: ChainRoots
    prompt: Prompt
    pin: Pin | None
    stopper: StopChecker
    generator: torch.Generator | None
    token_ids: list[int]
    arrival_s: float = field(default_factory=time.perf_counter)
    status: SeqStatus = SeqStatus.WAITING
    cached: CachedTokens | None = None
    history: TokenHistory | None = None  # generated-token counts, for penalties
    grammar: GrammarState | None = None  # the output's constraint, followed token by token
    index: int = 0  # which of the request's n choices (0: the one that prefilled the prompt)
    prompt_logprobs: PromptLogprobs | None = None
    eviction_mark: int = 0
    promoted: bool = False  # a background sequence that a later request shares: scheduled as any other
    evicted_predicted_tokens: int = 0
    first_token_s: float | None = None
    finished_s: float | None = None
    stop: Stop | None = None

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def background(self) -> bool:
        """Scheduled after every other sequence (see :attr:`EngineRequest.background`), until a
        request that shares its prompt promotes it (:meth:`Scheduler.add`)."""
        return self.request.background and not self.promoted

    @property
    def num_prompt_tokens(self) -> int:
        return self.request.num_prompt_tokens

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    def append(self, token_id: int) -> Stop | None:
        """Records a sampled token; returns the stop it causes (then the sequence is done)."""
        self.token_ids.append(token_id)
        if self.history is not None:
            self.history.add(token_id)
        if self.first_token_s is None:
            self.first_token_s = time.perf_counter()
        stop = self.stopper.check(token_id, self.num_tokens - self.num_prompt_tokens, self.num_tokens)
        return stop if self.grammar is None else self.grammar.stop(token_id, stop)

    @property
    def forks_pending(self) -> bool:
        """True until choice 0 of an ``n`` > 1 request samples its first token (then it forks)."""
        return self.index == 0 and self.request.sampling.n > 1 and self.num_tokens == self.num_prompt_tokens

    @property
    def needs_prompt_logits(self) -> bool:
        """True while the prompt's scores are incomplete: its prefill reuses no cached block and
        returns logits for every row (see :mod:`.prompt_logprobs`)."""
        return self.prompt_logprobs is not None and not self.prompt_logprobs.complete

    def take_prompt_logprobs(self) -> tuple[TokenLogprob, ...]:
        """The prompt's scores, the first time they are complete; else ()."""
        return () if self.prompt_logprobs is None else self.prompt_logprobs.take()

    def processing(self, vocab_size: int) -> Processing:
        """What the sampler must change in this sequence's next logits."""
        blocked = self.stopper.stop_ids(self.num_tokens - self.num_prompt_tokens, vocab_size)
        return Processing(self.request.sampling, self.history, blocked)

    def finish(self, stop: Stop) -> None:
        self.status, self.stop, self.finished_s = SeqStatus.FINISHED, stop, time.perf_counter()

    def rebuild_prompt(self, block_size: int, chunk_size: int) -> None:
        """Makes every known token the next admission's prompt (after a preemption)."""
        ids = np.asarray(self.token_ids, dtype=np.uint32)
        self.prompt = Prompt.build(ids, self.root, block_size=block_size, chunk_size=chunk_size)

    def usage(self) -> Usage:
        cached = self.cached or CachedTokens()
        outputs, evicted = len(self.output_ids), self.evicted_predicted_tokens
        return Usage(self.num_prompt_tokens, outputs, cached.total, cached.gpu, cached.cpu, evicted)

    def timings(self) -> RequestTimings:
        return RequestTimings(self.arrival_s, self.first_token_s, self.finished_s or time.perf_counter())

    @property
    def finish_reason(self) -> FinishReason | None:
        return None if self.stop is None else self.stop.reason
