"""``LLMEngine``: continuous batching over a paged, prefix-cached KV store with a GPU and a CPU tier.

One :meth:`LLMEngine.step`, in order (the block manager's contract, see ``kvgate.workers.kv.manager``):

1. take the requests and aborts queued since the last step (an abort frees the sequence's blocks);
2. ``expire()``: drop cached blocks whose TTL passed;
3. schedule: running decodes and prefill chunks, then admissions, preempting when blocks run out;
4. ``end_step()`` -> the step's copy plan; run its offloads (GPU -> CPU), then its swap-ins (CPU -> GPU);
5. one forward over every scheduled token; take the prompt log-probabilities asked for (see
   ``prompt_logprobs``); process the logits (penalties, biases), mask the constrained rows by their
   grammars, sample the sequences whose prompt is done, and take the log-probabilities asked for;
6. append the tokens, check stops, free finished sequences;
7. publish what the worker now holds (one ``EventBatch``, queued for :meth:`take_events`).

The engine is synchronous and single-threaded: call everything from one thread, except
:meth:`add_request`, :meth:`abort` and :meth:`has_work`, which are thread-safe. An exception from
:meth:`step` leaves the engine unusable (a half-run step's blocks may be cached without their K/V):
the worker restarts it under a new epoch, whose first event batch clears what the index held.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import replace
from pathlib import Path

import torch

from kvgate.common.clock import Clock, SystemClock
from kvgate.common.tokenizer import Tokenizer
from kvgate.kernels.protocol import AttentionKernels
from kvgate.proto.constraint import OutputConstraint
from kvgate.proto.events import EventBatch, Snapshot
from kvgate.proto.ids import ChunkHash
from kvgate.proto.sampling import FinishReason
from kvgate.proto.workers import WorkerLoad
from kvgate.workers.engine.config import EngineConfig
from kvgate.workers.engine.grammar import Grammar, GrammarCompiler
from kvgate.workers.engine.inbox import Inbox
from kvgate.workers.engine.intake import SequenceFactory
from kvgate.workers.engine.kv_pools import KVCapacity, allocate_cpu_tier, tier_sizes
from kvgate.workers.engine.kv_transfer import KVBlockBytes, export_blocks, import_blocks
from kvgate.workers.engine.logits import process
from kvgate.workers.engine.logprobs import token_logprobs
from kvgate.workers.engine.outputs import StepOutput
from kvgate.workers.engine.prompt_logprobs import score_prompts
from kvgate.workers.engine.request import EngineRequest
from kvgate.workers.engine.runner import ModelRunner
from kvgate.workers.engine.sampler import sample
from kvgate.workers.engine.scheduler import ScheduledItem, Scheduler
from kvgate.workers.engine.sequence import Sequence
from kvgate.workers.engine.stats import EngineCounters, KVWaste, kv_waste, tokens_to_prefill
from kvgate.workers.engine.stopping import Stop
from kvgate.workers.engine.token_mask import GrammarMasker
from kvgate.workers.kv import EventPublisher, ImportedPrefix, KVCacheManager, KVCounters, Prompt
from kvgate.workers.model import DecoderModel, ModelConfig, allocate_kv_caches
from kvgate.workers.model.lora import AdapterLibrary, AdapterSet, LoraAdapter, load_peft_adapter

MAX_QUEUED_EVENT_BATCHES = 1024  # older ones are dropped; the consumer sees the gap and asks for a snapshot


class LLMEngine:
    """Owns the model runner (model, kernels, both KV tiers), the block manager, the scheduler, the
    sampler's state and the event queue. Built once per worker incarnation by the composition root
    (see :func:`kvgate.workers.engine.load_engine`). ``kv``, ``scheduler``, ``runner`` and ``capacity``
    (the tiers' blocks and tokens in the KV dtype) are public for metrics and tests: read them, never
    mutate them."""

    def __init__(
        self,
        config: EngineConfig,
        model: DecoderModel,
        kernels: AttentionKernels,
        publisher: EventPublisher,
        *,
        tokenizer: Tokenizer | None = None,
        clock: Clock | None = None,
        adapters: AdapterSet | None = None,
        lora_dir: Path | None = None,
    ) -> None:
        """Allocates the KV tiers. Raises ValueError when ``model`` is not on ``config.device`` in
        ``config.dtype`` or the GPU tier cannot hold ``config.max_model_len`` tokens. ``adapters``:
        the LoRA adapters requests may name (on the model's device, in its dtype); None: none.
        ``lora_dir``: a folder of PEFT adapters loadable on request (:meth:`ensure_adapter`)."""
        _check_model(config, model)
        self.config, self.publisher = config, publisher
        self._clock = clock or SystemClock()
        self.layout = config.cache.with_kv(model.config.kv_geometry(config.kv_dtype.storage))
        device, bs, kv = config.torch_device, config.block_size, self.layout.kv
        self.capacity: KVCapacity = tier_sizes(config, kv)
        num_gpu, num_cpu = self.capacity.gpu_blocks, self.capacity.cpu_blocks
        self.max_model_len = _max_model_len(config, model.config, num_gpu)
        self.kv = KVCacheManager(config.kv_config(num_gpu, num_cpu), self._clock, publisher)
        gpu = allocate_kv_caches(kv, num_gpu, bs, device=device)
        cpu = allocate_cpu_tier(kv, num_cpu, bs, pinned=device.type == "cuda")
        self.adapters = adapters if adapters is not None else AdapterSet()
        self.library = AdapterLibrary(self.adapters, lora_dir, self._adapter_loader(model))
        self.runner = ModelRunner(model, kernels, gpu, cpu, bs, self.adapters)
        self.scheduler = Scheduler(config.limits, self.kv)
        eos = frozenset(model.config.eos_token_ids) | frozenset(tokenizer.eos_token_ids if tokenizer else ())
        vocab = model.config.vocab_size
        grammars = GrammarCompiler(tokenizer, vocab, eos) if tokenizer is not None else None
        self._masker = GrammarMasker(grammars.vocab_size if grammars else vocab)
        self._factory = SequenceFactory(
            config.cache,
            vocab,
            self.max_model_len,
            eos,
            config.ttl_s,
            device,
            tokenizer,
            grammars,
            self.adapters,
        )
        self._inbox = Inbox()
        self._seqs: dict[str, list[Sequence]] = {}  # a request's choices, taken from the inbox, not finished
        self._events: deque[EventBatch] = deque(maxlen=MAX_QUEUED_EVENT_BATCHES)
        self._counters = EngineCounters()
        self.last_event_seq = 0
        self.started_at_ms = self._clock.now_ms()

    # -- any thread -------------------------------------------------------------------------------

    def add_request(self, request: EngineRequest, grammar: Grammar | None = None) -> tuple[ChunkHash, ...]:
        """Queues ``request``; the next step takes it. Returns its prompt's chunk hashes (in chain
        order: what this worker publishes once they are stored). Thread-safe. Raises ValueError when
        its id is in flight or it cannot run here (see :meth:`SequenceFactory.build`). ``grammar``:
        its output constraint, compiled by :meth:`compile_grammar` (None: compiled here if it has one)."""
        seq = self._factory.build(request, grammar)
        self._inbox.add(seq)
        return seq.prompt.chunk_hashes

    def compile_grammar(self, constraint: OutputConstraint) -> Grammar:
        """``constraint`` compiled against the engine's tokenizer, from a bounded cache of recent ones.
        Thread-safe; may take milliseconds, so an event loop calls it from a thread. ValueError, with
        the reason, when it cannot be compiled."""
        return self._factory.compile(constraint)

    def ensure_adapter(self, name: str) -> None:
        """Loads LoRA adapter ``name`` from the engine's folder unless it is held already (see
        :class:`AdapterLibrary`). Thread-safe; may take a while, so an event loop calls it from a
        thread. ValueError when this engine cannot hold it."""
        self.library.ensure(name)

    def _adapter_loader(self, model: DecoderModel) -> Callable[[Path, str], LoraAdapter]:
        device, dtype = self.config.torch_device, self.config.torch_dtype
        return lambda folder, name: load_peft_adapter(folder, name, model.config).to(device, dtype)

    def abort(self, request_id: str) -> bool:
        """Aborts a request at the next step boundary (its blocks are freed, its last output says
        ABORT). Thread-safe, idempotent: False when the request is unknown or already finished."""
        return self._inbox.abort(request_id)

    def has_work(self) -> bool:
        """True while a request is queued, waiting or running. Thread-safe."""
        return bool(self._inbox) or len(self.scheduler) > 0

    # -- the engine thread ------------------------------------------------------------------------

    def step(self) -> list[StepOutput]:
        """Runs one step (see the module docstring); returns the outputs of the requests that got a
        token or finished in it. A step with nothing to run only publishes."""
        outputs = self._take_inbox()
        self.kv.expire()
        plan = self.scheduler.schedule()
        copies = self.kv.end_step()  # publishes this step's evictions: lost_to_eviction sees them
        for seq in plan.admitted:
            self._admitted(seq)
        self._counters.preemptions += len(plan.preempted)
        self.runner.copy(copies)
        if plan.items:
            self._counters.steps += 1
            outputs += self._run(plan.items)
        self.kv.flush_events()
        self._publish()
        return outputs

    def transfer_prompt(self, request: EngineRequest) -> tuple[Prompt, int]:
        """``request``'s prompt as the block manager keys it, and its tokens cached here now (either
        tier), for a KV export or import (pure)."""
        prompt = self._factory.prompt(request)
        return prompt, self.kv.lookup(prompt).cached.total

    def export_kv(self, prompt: Prompt, first: int, count: int) -> list[KVBlockBytes]:
        """The KV of ``prompt``'s blocks ``first ..`` (at most ``count``) cached here now, in order,
        stopping where the cache does (see :mod:`.kv_transfer`). Pure."""
        return export_blocks(self.kv, self.runner.gpu, self.runner.cpu, prompt, first, count)

    def import_kv(self, prompt: Prompt, blocks: list[KVBlockBytes]) -> ImportedPrefix:
        """Caches another worker's KV of ``prompt``'s consecutive ``blocks`` on the GPU tier, after
        the prefix cached here; ValueError, importing nothing, for a block that does not check out
        (see :func:`.kv_transfer.import_blocks`). The next admission reuses them as GPU hits."""
        return import_blocks(self.kv, self.runner.gpu, self.runner.copy, prompt, blocks)

    def load(self) -> WorkerLoad:
        """The load figures a worker sends with its heartbeat (pure)."""
        pending, pending_tokens = self._inbox.pending()
        waiting, running = self.scheduler.waiting, self.scheduler.running
        gpu, cpu, kv = self.kv.gpu_pool, self.kv.cpu_pool, self.kv.counters
        return WorkerLoad(
            waiting_prefill_tokens=pending_tokens + tokens_to_prefill(waiting, running, self.kv),
            running_seqs=len(running),
            waiting_seqs=len(waiting) + pending,
            gpu_blocks_total=gpu.num_blocks,
            gpu_blocks_free=gpu.num_free,
            cpu_blocks_total=cpu.num_blocks,
            cpu_blocks_free=cpu.num_empty,  # a CPU block holding a chunk is unreferenced, yet not free
            gpu_blocks_cached=gpu.num_free - gpu.num_empty,
            evicted_ttl_blocks=kv.evicted_ttl,
            evicted_pressure_blocks=kv.evicted_pressure,
            offloaded_blocks=kv.offloaded,
        )

    def counters(self) -> EngineCounters:
        """A copy of the engine's monotonic counters."""
        return self._counters.copy()

    def kv_counters(self) -> KVCounters:
        """A copy of the block manager's counters: offloaded / swapped-in blocks, evictions by cause."""
        return replace(self.kv.counters)

    def kv_waste(self) -> KVWaste:
        """Allocated-but-unused GPU slots now (pure)."""
        return kv_waste(self.kv, self.scheduler.running)

    def take_events(self) -> list[EventBatch]:
        """The event batches published since the last call, oldest first (seq numbers consecutive
        unless more than ``MAX_QUEUED_EVENT_BATCHES`` piled up: then take a :meth:`snapshot`)."""
        batches = list(self._events)
        self._events.clear()
        return batches

    def snapshot(self) -> Snapshot:
        """Everything held now, for an index that missed batches; replaces the queued batches (they are
        dropped: the snapshot covers them) and takes the next seq number."""
        self._events.clear()
        self.kv.flush_events()
        snapshot = self.publisher.snapshot()
        self.last_event_seq = snapshot.seq
        return snapshot

    # -- internals --------------------------------------------------------------------------------

    def _take_inbox(self) -> list[StepOutput]:
        added, aborts = self._inbox.take()
        for seq in added:
            self._seqs[seq.request_id] = [seq]
            seq.eviction_mark = self.kv.eviction_mark
            self.scheduler.add(seq)
            self._counters.requests += 1
            self._counters.prompt_tokens += seq.num_prompt_tokens
        return [out for request_id in aborts if (out := self._abort(request_id)) is not None]

    def _admitted(self, seq: Sequence) -> None:
        # First admission: its cache hits are known, and so is what the prediction lost to evictions.
        predicted, cached = seq.request.predicted_cached_tokens, seq.cached
        assert cached is not None
        if predicted is not None:
            lost = self.kv.lost_to_eviction(seq.prompt, cached.total, predicted, seq.eviction_mark)
            seq.evicted_predicted_tokens = lost
        self._counters.count_admitted(seq)

    def _abort(self, request_id: str) -> StepOutput | None:
        choices = self._seqs.get(request_id)
        if choices is None:
            return None  # finished before the abort was taken
        live = [seq for seq in choices if seq.stop is None]
        for seq in live:
            self.scheduler.abort(seq)
            seq.finish(Stop(FinishReason.ABORT))
        return self._finish(live[0], ())

    def _run(self, items: Seq[ScheduledItem]) -> list[StepOutput]:
        input_ids = [t for item in items for t in _new_tokens(item)]
        logits = self.runner.forward([item.work for item in items], input_ids)  # [B', vocab]
        logits = score_prompts(items, logits)  # [B, vocab]: the sampled rows, prompt scores taken out
        seqs = [item.seq for item in items if item.work.needs_logits]
        rows, forks = self._rows(seqs)  # a request that forks samples each of its n choices
        logits = logits[rows].float() if len(rows) > len(seqs) else logits.float()  # [R, vocab]
        vocab = logits.shape[-1]
        processed = process(logits, [s.processing(vocab) for s in forks])
        processed = self._masker.constrain(processed, logits, [s.grammar for s in forks])
        tokens = sample(processed, [s.request.sampling for s in forks], [s.generator for s in forks])
        logprobs = self._logprobs(logits, forks, tokens)
        return [self._advance(seq, token, lp) for seq, token, lp in zip(forks, tokens, logprobs, strict=True)]

    def _rows(self, seqs: list[Sequence]) -> tuple[list[int], list[Sequence]]:
        """The logits row of each sequence to sample: a request's choice 0 at its first token comes
        with its ``n - 1`` forks, which share the prompt's row (and, once admitted, its cached blocks)."""
        rows, out = [], []
        for row, seq in enumerate(seqs):
            choices = [seq]
            if seq.forks_pending:
                choices += [self._factory.fork(seq, i) for i in range(1, seq.request.sampling.n)]
                self._seqs[seq.request_id].extend(choices[1:])
            rows += [row] * len(choices)
            out += choices
        return rows, out

    def _logprobs(self, logits: torch.Tensor, seqs: list[Sequence], tokens: list[int]) -> list[tuple]:
        wanted = [r for r, seq in enumerate(seqs) if seq.request.sampling.logprobs is not None]
        out: list[tuple] = [()] * len(seqs)
        if wanted:
            top = [seqs[r].request.sampling.logprobs or 0 for r in wanted]
            found = token_logprobs(logits[wanted], [tokens[r] for r in wanted], top)
            for r, lp in zip(wanted, found, strict=True):
                out[r] = (lp,)
        return out

    def _advance(self, seq: Sequence, token: int, logprobs: tuple) -> StepOutput:
        forked = seq.seq_id not in self.kv  # a fork's first token: it is admitted later
        prompt = seq.take_prompt_logprobs()  # with the first token, when asked for
        stop = seq.append(token)
        self._counters.completion_tokens += 1
        if forked:
            seq.rebuild_prompt(self.kv.config.block_size, self.kv.config.chunk_size)
        else:
            self.kv.append_tokens(seq.seq_id, (token,))
        if stop is None:
            if forked:
                self.scheduler.add_fork(seq)
            return StepOutput.of(seq, (token,), logprobs, prompt)
        if not forked:
            self.scheduler.finish(seq)
        seq.finish(stop)
        return self._finish(seq, (token,), logprobs, prompt)

    def _finish(
        self, seq: Sequence, new_token_ids: tuple[int, ...], logprobs: tuple = (), prompt: tuple = ()
    ) -> StepOutput:
        """The output of ``seq``, which just ended; the request's last one when its choices all did."""
        choices = self._seqs[seq.request_id]
        if any(s.stop is None for s in choices):
            return StepOutput.of(seq, new_token_ids, logprobs, prompt)
        assert choices[0].stop is not None
        self._counters.count_finished(choices[0].stop.reason)
        del self._seqs[seq.request_id]
        self._inbox.retire(seq.request_id)
        return StepOutput.last(choices, seq, new_token_ids, logprobs, prompt)

    def _publish(self) -> None:
        batch = self.publisher.drain()
        if batch is not None:
            self._events.append(batch)
            self.last_event_seq = batch.seq


def _new_tokens(item: ScheduledItem) -> list[int]:
    start = item.work.num_cached
    return item.seq.token_ids[start : start + item.work.num_new]


def _check_model(config: EngineConfig, model: DecoderModel) -> None:
    weight = model.embed.weight
    want = config.torch_device
    if weight.device.type != want.type or (want.index is not None and weight.device.index != want.index):
        raise ValueError(f"the model is on {weight.device}, the config says {config.device}")
    if weight.dtype != config.torch_dtype:
        raise ValueError(f"the model's dtype is {weight.dtype}, the config says {config.dtype}")


def _max_model_len(config: EngineConfig, model: ModelConfig, num_gpu_blocks: int) -> int:
    limit = min(model.max_position_embeddings, num_gpu_blocks * config.block_size)
    if config.max_model_len is None:
        return limit
    if config.max_model_len > limit:
        raise ValueError(
            f"max_model_len {config.max_model_len} > {limit} (the model's context or the GPU tier's capacity)"
        )
    return config.max_model_len
