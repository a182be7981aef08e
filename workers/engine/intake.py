"""Turning an :class:`EngineRequest` into a :class:`Sequence`: validation against the model, hashing,
the cache pin, the stop checker and the random stream. Runs on the caller's thread (no engine state)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kvgate.common.tokenizer import Tokenizer
from kvgate.proto.chain import ChainRoots
from kvgate.proto.constraint import OutputConstraint
from kvgate.proto.layout import CacheLayout
from kvgate.workers.engine.grammar import Grammar, GrammarCompiler
from kvgate.workers.engine.logits import TokenHistory
from kvgate.workers.engine.prompt_logprobs import PromptLogprobs
from kvgate.workers.engine.request import EngineRequest
from kvgate.workers.engine.sampler import make_generator
from kvgate.workers.engine.sequence import Sequence
from kvgate.workers.engine.stopping import StopChecker
from kvgate.workers.kv import CachedTokens, Pin, Prompt, SeqId
from kvgate.workers.model.lora import AdapterSet

DETOKENIZER_CONTEXT = 6  # prompt tokens decoded before the first new one (keeps its leading space)


@dataclass(frozen=True, slots=True)
class SequenceFactory:
    """What a new sequence is checked and built against. Immutable; safe to use from any thread."""

    cache: CacheLayout
    vocab_size: int
    max_model_len: int
    eos_ids: frozenset[int]
    default_ttl_s: float
    device: torch.device
    tokenizer: Tokenizer | None = None
    grammars: GrammarCompiler | None = None  # None: constrained decoding is refused (no tokenizer)
    adapters: AdapterSet = field(default_factory=AdapterSet)  # the LoRA adapters requests may name

    def build(self, request: EngineRequest, grammar: Grammar | None = None) -> Sequence:
        """A waiting sequence for ``request``. Raises ValueError when the request cannot run here: a
        LoRA adapter not held here, a prompt of ``max_model_len`` tokens or more, a token id outside
        the vocabulary, stop strings without a tokenizer, or an output constraint that cannot be
        compiled. ``grammar``: the request's constraint compiled already (see :meth:`compile`); None
        compiles it here, on the caller's thread."""
        self._check(request)
        constraint = request.sampling.constraint
        if constraint is not None and grammar is None:
            grammar = self.compile(constraint)
        ids = request.prompt_ids
        root = self._roots(request)
        prompt = self.prompt(request)
        return Sequence(
            request=request,
            seq_id=SeqId(request.request_id),
            root=root,
            prompt=prompt,
            pin=self._pin(request),
            stopper=self._stopper(request),
            generator=make_generator(request.sampling, self.device),
            token_ids=ids.tolist(),
            history=self._history(request),
            grammar=None if grammar is None else grammar.start(),
            prompt_logprobs=_prompt_logprobs(request),
        )

    def prompt(self, request: EngineRequest) -> Prompt:
        """``request``'s prompt hashed along its chain (salts, adapter, shared prefix), as the block
        manager keys it (pure; no validation against the model)."""
        cache = self.cache
        return Prompt.build(
            request.prompt_ids, self._roots(request), block_size=cache.block_size, chunk_size=cache.chunk_size
        )

    def compile(self, constraint: OutputConstraint) -> Grammar:
        """``constraint`` compiled against the tokenizer (cached; may take milliseconds). ValueError
        when it cannot be, or when this engine has no tokenizer."""
        if self.grammars is None:
            raise ValueError("output constraints need a tokenizer; this engine has none")
        return self.grammars.compile(constraint)

    def fork(self, parent: Sequence, index: int) -> Sequence:
        """Choice ``index`` of ``parent``'s request, before its first token: its own id, stopper,
        history, random stream and grammar state (a copy of the parent's, still at the start); its
        cached tokens are the parent's (the prompt counts once)."""
        request = parent.request
        return Sequence(
            request=request,
            seq_id=SeqId(f"{request.request_id}#{index}"),
            root=parent.root,
            prompt=parent.prompt,
            pin=parent.pin,
            stopper=self._stopper(request),
            generator=make_generator(request.sampling, self.device, index),
            token_ids=request.prompt_ids.tolist(),
            history=self._history(request),
            index=index,
            cached=CachedTokens(),
            grammar=None if parent.grammar is None else parent.grammar.fork(),
        )

    def _stopper(self, request: EngineRequest) -> StopChecker:
        context = request.prompt_ids[-DETOKENIZER_CONTEXT:].tolist()
        return StopChecker(request.sampling, self.eos_ids, self.max_model_len, context, self.tokenizer)

    def _history(self, request: EngineRequest) -> TokenHistory | None:
        params = request.sampling
        if not (params.presence_penalty or params.frequency_penalty or params.repetition_penalty != 1):
            return None
        repeat = params.repetition_penalty != 1
        return TokenHistory(request.prompt_ids.tolist(), self.vocab_size, self.device, repeat)

    def _roots(self, request: EngineRequest) -> ChainRoots:
        """The request's chain: its own root, after a shared namespace's for ``shared_tokens``."""
        r = request
        return self.cache.roots(r.cache_salt, r.shared_salt, r.shared_tokens, r.adapter_id)

    def _check(self, request: EngineRequest) -> None:
        if request.adapter_id:
            self.adapters.get(request.adapter_id)  # raises, naming the adapters held here
        if request.num_prompt_tokens >= self.max_model_len:
            raise ValueError(
                f"the prompt has {request.num_prompt_tokens} tokens; this engine runs sequences of at most"
                f" {self.max_model_len} tokens, the output included"
            )
        largest = int(request.prompt_ids.max())
        if largest >= self.vocab_size:
            raise ValueError(f"prompt token id {largest} >= vocab size {self.vocab_size}")
        biased = [t for t, _ in request.sampling.logit_bias if t >= self.vocab_size]
        if biased:
            raise ValueError(f"logit_bias token id {biased[0]} >= vocab size {self.vocab_size}")

    def _pin(self, request: EngineRequest) -> Pin | None:
        hint = request.cache_hint
        if hint is None or not hint.active:
            return None
        return Pin(hint.pinned_prefix_tokens, self.default_ttl_s if hint.ttl_s is None else float(hint.ttl_s))


def _prompt_logprobs(request: EngineRequest) -> PromptLogprobs | None:
    top = request.sampling.prompt_logprobs
    return None if top is None else PromptLogprobs(request.prompt_ids, top)
