"""What a tool-call format is: how a block of calls opens in a model's text, where it ends, and the calls
it makes. One file per format (:mod:`.hermes`, :mod:`.llama_json`, :mod:`.mistral`); which of them a
served model writes is chosen from its tokenizer (:mod:`.served`), and
:class:`~.scanner.FormatScanner` reads any set of them from a stream.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from kvgate.gateway.core.tools import ToolCall


class CallFormat(Protocol):
    """One way a model writes calls. Stateless; the scanner keeps the state.

    ``name``: how the docs and logs call it. ``markers``: the texts that open a block. ``kept``: every
    fixed text of the format (markers and closing tags) that must reach the scanner: one that is a
    special token of the tokenizer is kept in the decoded text (see :mod:`.served`). ``bare_start``:
    a block may also open with no marker, as the first non-blank text of the answer, at its ``{``."""

    name: str
    markers: tuple[str, ...]
    kept: tuple[str, ...]
    bare_start: bool

    def block_length(self, text: str, final: bool) -> int | None:
        """How many characters of ``text`` (what follows the opening marker) the block takes; None
        while that is not known yet (more text may extend it). ``final``: no text follows; then None
        means the block is unfinished (it stays content)."""
        ...

    def calls(self, block: str, names: Collection[str]) -> list[ToolCall] | None:
        """The calls ``block`` makes, each to one of ``names`` with its arguments' JSON text (an
        object); None when it is not a valid block of calls (it stays content, as written)."""
        ...
