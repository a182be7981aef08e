"""When a sequence ends: EOS, stop token ids, stop strings, ``max_tokens`` and the context length."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvgate.common.tokenizer import IncrementalDetokenizer, Tokenizer
from kvgate.proto.sampling import FinishReason, SamplingParams


@dataclass(frozen=True, slots=True)
class Stop:
    """Why a sequence ended: ``reason``, and the stop string that ended it (``matched``; None for EOS,
    stop token ids and lengths)."""

    reason: FinishReason
    matched: str | None = None


class StopChecker:
    """Checks one sequence after each new token; mutable (holds the sequence's detokenizer).

    Rules, in order: an EOS id (unless ``ignore_eos``) or a stop token id ends with STOP, the token kept
    in the output; a stop string in the detokenized output (special tokens skipped) ends with STOP and
    reports the string (the tokens are not trimmed: the caller trims the text); ``max_tokens`` new tokens,
    or ``max_model_len`` tokens in all, end with LENGTH.
    """

    def __init__(
        self,
        params: SamplingParams,
        eos_ids: frozenset[int],
        max_model_len: int,
        prompt_ids: Sequence[int],
        tokenizer: Tokenizer | None,
    ) -> None:
        """Raises ValueError when ``params`` has stop strings but there is no ``tokenizer``."""
        if params.stop and tokenizer is None:
            raise ValueError("stop strings need a tokenizer; this engine has none")
        self._params = params
        self._stop_ids = frozenset(params.stop_token_ids) | (frozenset() if params.ignore_eos else eos_ids)
        self._max_model_len = max_model_len
        self._detokenizer = None
        if params.stop and tokenizer is not None:
            self._detokenizer = IncrementalDetokenizer(tokenizer, prompt_ids, skip_special_tokens=True)

    def stop_ids(self, num_generated: int, vocab_size: int) -> tuple[int, ...]:
        """The ids that would end the sequence but may not while fewer than ``min_tokens`` were
        generated (``num_generated`` so far; the sampler blocks them); empty once enough were."""
        if num_generated >= self._params.min_tokens:
            return ()
        return tuple(sorted(t for t in self._stop_ids if t < vocab_size))

    def check(self, token_id: int, num_generated: int, num_tokens: int) -> Stop | None:
        """The stop caused by ``token_id``, just appended as the ``num_generated``-th new token
        (``num_tokens`` in all, prompt included); None to go on. Before ``min_tokens`` new tokens
        only the lengths end a sequence."""
        early = num_generated < self._params.min_tokens
        if token_id in self._stop_ids and not early:
            return Stop(FinishReason.STOP)
        matched = self._stop_string(token_id)
        if matched is not None and not early:
            return Stop(FinishReason.STOP, matched)
        if num_generated >= self._params.max_tokens or num_tokens >= self._max_model_len:
            return Stop(FinishReason.LENGTH)
        return None

    def _stop_string(self, token_id: int) -> str | None:
        """The stop string that the text completed by ``token_id`` contains first, if any."""
        if self._detokenizer is None:
            return None
        delta = self._detokenizer.push((token_id,))
        if not delta:
            return None
        text = self._detokenizer.text
        found = []
        for stop in self._params.stop:
            # Only a match that ends inside the new text is new: look back len(stop) - 1 characters.
            at = text.find(stop, max(0, len(text) - len(delta) - len(stop) + 1))
            if at >= 0:
                found.append((at, stop))
        return min(found)[1] if found else None
