"""Constrained decoding's state: output constraints compiled against the engine's tokenizer (a bounded
cache of compiled grammars) and one matcher per sequence, which follows its tokens.

A :class:`Grammar` is a compiled constraint, never advanced: each sequence starts its own
:class:`GrammarState` from it (a copy, microseconds), and each fork of an ``n`` > 1 request copies its
parent's state before the first token. The engine masks every constrained row of a step with
:mod:`kvgate.workers.engine.token_mask` and advances each state by the token sampled for it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable

import llguidance

from kvgate.common.grammar import grammar_of
from kvgate.common.tokenizer import Tokenizer
from kvgate.proto.constraint import OutputConstraint
from kvgate.proto.sampling import FinishReason
from kvgate.workers.engine.stopping import Stop

log = logging.getLogger(__name__)

DEFAULT_GRAMMAR_CACHE = 64  # compiled grammars kept, most recently used first


class GrammarState:
    """One sequence's place in its grammar; mutated by :meth:`advance`, used on the engine thread only.

    ``matcher`` is llguidance's, for the mask computation; everything else goes through this class."""

    __slots__ = ("matcher",)

    def __init__(self, matcher: llguidance.LLMatcher) -> None:
        self.matcher = matcher

    def fork(self) -> GrammarState:
        """An independent copy at the same place (a fork's own state)."""
        return GrammarState(self.matcher.deep_copy())

    def advance(self, token_id: int) -> None:
        """Follows ``token_id``, just sampled; a token the grammar does not allow puts the state in
        error (see :attr:`error`) for good."""
        self.matcher.consume_token(token_id)

    @property
    def error(self) -> str | None:
        """Why the grammar failed (a token it did not allow), None while it holds."""
        return self.matcher.get_error() if self.matcher.is_error() else None

    @property
    def complete(self) -> bool:
        """True when nothing can follow: the output is a complete match (or EOS was consumed)."""
        return self.matcher.is_stopped() and not self.matcher.is_error()

    def stop(self, token_id: int, stop: Stop | None) -> Stop | None:
        """Advances by ``token_id`` and returns the stop of the sequence after it: ERROR when the
        token broke the grammar; STOP when the match is complete (it wins over a LENGTH stop of the
        same token: the output is whole); else ``stop``, the stop checker's verdict."""
        self.advance(token_id)
        if (error := self.error) is not None:
            log.warning("a constrained sequence left its grammar: %s", error.splitlines()[0])
            return Stop(FinishReason.ERROR)
        if self.complete and (stop is None or stop.reason is FinishReason.LENGTH):
            return Stop(FinishReason.STOP)
        return stop


class Grammar:
    """A compiled constraint. Immutable (its matcher is never advanced, only copied)."""

    __slots__ = ("_lock", "_template")

    def __init__(self, template: llguidance.LLMatcher) -> None:
        self._template = template
        self._lock = threading.Lock()

    def start(self) -> GrammarState:
        """A new sequence's state, at the grammar's start. Thread-safe."""
        with self._lock:
            return GrammarState(self._template.deep_copy())


class GrammarCompiler:
    """Compiles constraints against one tokenizer, keeping the ``capacity`` most recently used
    grammars. Thread-safe; :meth:`compile` may take milliseconds (seconds for a huge schema), so
    an event loop calls it from a thread.

    The grammar's end is the engine's EOS (``eos_ids``): a mask allows it only where the output is a
    complete match. A model without one ends a constrained sequence on the tokenizer's last special
    token instead (never text, dropped from the output as special tokens are)."""

    def __init__(
        self, tokenizer: Tokenizer, vocab_size: int, eos_ids: Iterable[int],
        capacity: int = DEFAULT_GRAMMAR_CACHE,
    ) -> None:  # fmt: skip
        """``vocab_size``: the model's (the logits' width); masks cover ``max(vocab_size, the
        tokenizer's)`` ids."""
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.vocab_size = max(vocab_size, tokenizer.vocab_size)
        self._tokenizer = tokenizer
        self._eos = sorted(t for t in eos_ids if t < self.vocab_size) or _last_special(tokenizer)
        self._capacity = capacity
        self._lock = threading.Lock()
        self._llt: llguidance.LLTokenizer | None = None
        self._grammars: OrderedDict[OutputConstraint, Grammar] = OrderedDict()

    def compile(self, constraint: OutputConstraint) -> Grammar:
        """``constraint`` compiled (from the cache when it was compiled lately). ValueError, with the
        grammar engine's reason, for a constraint it cannot compile or a model with no end token."""
        with self._lock:
            if constraint in self._grammars:
                self._grammars.move_to_end(constraint)
                return self._grammars[constraint]
        grammar = self._compile(constraint)  # outside the lock: other compilations go on meanwhile
        with self._lock:
            self._grammars[constraint] = grammar
            while len(self._grammars) > self._capacity:
                self._grammars.popitem(last=False)
        return grammar

    def __len__(self) -> int:
        return len(self._grammars)

    def _compile(self, constraint: OutputConstraint) -> Grammar:
        """The grammar, its first mask computed on a copy: a grammar that cannot even start (one that
        allows no output at all) is refused here, not found out by a running sequence."""
        matcher = llguidance.LLMatcher(self._ll_tokenizer(), grammar_of(constraint), log_level=0)
        probe = matcher.deep_copy()
        probe.compute_bitmask()
        for failed in (matcher, probe):
            if failed.is_error():
                reason = failed.get_error().splitlines()[0]
                raise ValueError(f"the output constraint cannot be compiled: {reason}")
        return Grammar(matcher)

    def _ll_tokenizer(self) -> llguidance.LLTokenizer:
        """llguidance's view of the tokenizer, built on first use (a pass over the vocabulary)."""
        with self._lock:
            if self._llt is None:
                if not self._eos:
                    raise ValueError("constrained decoding needs an end token; this model has none")
                json_text = self._tokenizer.backend.to_str()
                self._llt = llguidance.LLTokenizer(json_text, n_vocab=self.vocab_size, eos_token=self._eos)
            return self._llt


def _last_special(tokenizer: Tokenizer) -> list[int]:
    """The id of the tokenizer's last special added token, as a list (empty when it has none)."""
    added = tokenizer.backend.get_added_tokens_decoder()
    special = [i for i, token in added.items() if token.special]
    return [max(special)] if special else []
