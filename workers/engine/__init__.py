"""The worker's inference engine: continuous batching over the paged, prefix-cached KV store.

Walk a request through it: :class:`EngineRequest` -> ``LLMEngine.add_request`` (validated and hashed into a
:class:`Sequence`, ``intake``) -> ``Scheduler`` (token budget, chunked prefill, admission with the cached
prefix, preemption; ``scheduler``) -> ``ModelRunner`` (tier copies, then one forward; ``runner``) ->
logit processing (``logits``) and grammar masks (``token_mask``, ``grammar``) -> ``sample`` (``sampler``)
-> ``StopChecker`` (``stopping``) -> :class:`StepOutput` per step, the last one
with finish reason and usage. ``load_engine`` builds an engine from a model path.
"""

from kvgate.workers.engine.completion import Completion, run_to_completion
from kvgate.workers.engine.config import DEFAULT_KERNEL_BACKEND, EngineConfig, SchedulingLimits
from kvgate.workers.engine.engine import LLMEngine
from kvgate.workers.engine.factory import load_engine
from kvgate.workers.engine.grammar import Grammar, GrammarCompiler
from kvgate.workers.engine.outputs import StepOutput
from kvgate.workers.engine.request import EngineRequest
from kvgate.workers.engine.scheduler import ScheduledItem, Scheduler, SchedulerOutput
from kvgate.workers.engine.sequence import RequestTimings, SeqStatus, Sequence
from kvgate.workers.engine.stats import EngineCounters, KVWaste

__all__ = [
    "DEFAULT_KERNEL_BACKEND",
    "Completion",
    "EngineConfig",
    "EngineCounters",
    "EngineRequest",
    "Grammar",
    "GrammarCompiler",
    "KVWaste",
    "LLMEngine",
    "RequestTimings",
    "ScheduledItem",
    "Scheduler",
    "SchedulerOutput",
    "SchedulingLimits",
    "SeqStatus",
    "Sequence",
    "StepOutput",
    "load_engine",
    "run_to_completion",
]
