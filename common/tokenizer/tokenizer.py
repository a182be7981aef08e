"""The model's tokenizer: text <-> token ids, special ids and the chat template. Torch-free.

Token ids are uint32 numpy arrays, the layout ``kvgate.proto.hashing`` hashes without a copy.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import tokenizers

from kvgate.common.tokenizer.chat_template import ChatTemplate, Message

TokenIds = npt.NDArray[np.uint32]


@dataclass(frozen=True, slots=True)
class SpecialTokens:
    """Ids with a meaning for generation. ``eos_ids[0]`` is the model's EOS; generation stops at any of
    ``eos_ids`` (Llama 3 ends a turn with ``<|eot_id|>``, not its EOS). None: the model has none."""

    bos_id: int | None
    eos_ids: tuple[int, ...]
    pad_id: int | None = None


class Tokenizer:
    """A ``tokenizers.Tokenizer`` with the model's special ids and chat template. Immutable after
    construction; ``encode`` / ``decode`` may be called from several threads at once."""

    def __init__(
        self, backend: tokenizers.Tokenizer, special: SpecialTokens, chat_template: str | None = None
    ) -> None:
        """``chat_template`` is the Jinja source; None when the model has none (then
        ``apply_chat_template`` raises)."""
        self.backend = backend
        self.special = special
        self.chat_template = ChatTemplate(chat_template, self._token_strings()) if chat_template else None

    def _token_strings(self) -> dict[str, str]:
        """``bos_token`` / ``eos_token`` / ``pad_token`` as strings, the chat template's variables."""
        ids = {
            "bos_token": self.bos_token_id,
            "eos_token": self.eos_token_id,
            "pad_token": self.special.pad_id,
        }
        tokens = {name: self.backend.id_to_token(i) for name, i in ids.items() if i is not None}
        return {name: token for name, token in tokens.items() if token is not None}

    @functools.cached_property
    def max_token_chars(self) -> int:
        """The most characters one token's vocabulary entry has (added tokens included): a text of
        ``n`` characters encodes to at least about ``n / max_token_chars`` tokens."""
        return max(map(len, self.backend.get_vocab(with_added_tokens=True)), default=1)

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included."""
        return self.backend.get_vocab_size(with_added_tokens=True)

    @property
    def bos_token_id(self) -> int | None:
        return self.special.bos_id

    @property
    def eos_token_id(self) -> int | None:
        """The model's EOS (the first of ``eos_token_ids``), None if it has none."""
        return self.special.eos_ids[0] if self.special.eos_ids else None

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """Every id that ends generation."""
        return self.special.eos_ids

    def encode(self, text: str, *, add_special_tokens: bool = True) -> TokenIds:
        """Token ids of ``text`` as uint32 ``[n]``. Special tokens written in the text (``<|im_start|>``)
        are recognised; ``add_special_tokens`` adds what the model adds around a text (e.g. BOS).
        Releases the GIL while it tokenizes (see ``encode_batch``)."""
        return self.encode_batch([text], add_special_tokens=add_special_tokens)[0]

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = True) -> list[TokenIds]:
        """``encode`` of each of ``texts``, tokenized in parallel. The GIL is released meanwhile: unlike
        ``tokenizers.Tokenizer.encode``, which holds it (a 32k-token text would stall every other
        thread, an event loop included, for tens of milliseconds). Offsets are not computed."""
        encodings = self.backend.encode_batch_fast(list(texts), add_special_tokens=add_special_tokens)
        return [np.asarray(e.ids, dtype=np.uint32) for e in encodings]

    def decode(
        self,
        ids: Sequence[int] | npt.NDArray[np.integer],
        *,
        skip_special_tokens: bool = False,
        keep: Collection[int] = (),
    ) -> str:
        """The text of ``ids``. A multi-byte character cut off at either end decodes as U+FFFD.
        ``keep``: special tokens shown even when ``skip_special_tokens`` (a tool-call marker); the
        text between two of them is decoded on its own."""
        listed = np.asarray(ids, dtype=np.uint32).tolist()
        if not (skip_special_tokens and keep and any(i in keep for i in listed)):
            return self.backend.decode(listed, skip_special_tokens=skip_special_tokens)
        runs = itertools.groupby(listed, key=lambda i: i in keep)
        return "".join(self.backend.decode(list(run), skip_special_tokens=not kept) for kept, run in runs)

    def id_to_token(self, token_id: int) -> str | None:
        """The vocabulary entry of ``token_id`` (as spelled in the vocabulary), None when out of range."""
        return self.backend.id_to_token(token_id)

    def apply_chat_template(
        self, messages: Sequence[Message], *, add_generation_prompt: bool = True, **extra: Any
    ) -> str:
        """The prompt text of ``messages`` by the model's chat template; encode it with
        ``add_special_tokens=False`` (the template writes the special tokens itself). Raises
        ``ValueError`` when the model has no chat template, ``ChatTemplateError`` when the template
        rejects the messages."""
        if self.chat_template is None:
            raise ValueError("this model has no chat template")
        return self.chat_template.render(messages, add_generation_prompt=add_generation_prompt, **extra)
