"""Reading calls back from a model's text in any of a set of formats, as it streams in.

A :class:`FormatScanner` takes the text in pieces (a whole answer is one piece) and gives back, in
order, the text that is plain content and every complete call, as
:class:`~kvgate.gateway.core.tool_calls.CallScanner` does for the Hermes form alone: outside a block,
text that might be the start of any format's marker is held back until it is known not to be one
(and, while the answer has said nothing yet, blanks and a format's bare ``{``); a block runs until its
format says where it ends, then becomes its calls, or, when it is not a valid block of calls to
declared functions, content as written (marker included). Blanks around calls are dropped. Fed the
same text in whatever pieces, it gives the same content and calls (only the call ids differ).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kvgate.gateway.core.call_formats.format import CallFormat
from kvgate.gateway.core.tool_calls import Piece, partial_tag


class FormatScanner:
    """One choice's text, scanned for calls in ``formats``; mutable. ``names``: the declared functions."""

    def __init__(self, names: Collection[str], formats: Sequence[CallFormat]) -> None:
        self._names, self._formats = names, formats
        self._openers = [(m, f) for f in formats for m in f.markers]
        self._buffer = ""
        self._open: tuple[CallFormat, str] | None = None  # the open block's format and marker
        self._said = False  # content or a call was given out: no bare block can open now
        self._after_call = False  # blanks are dropped until the next content
        self.calls = 0  # complete calls found so far

    def feed(self, text: str) -> list[Piece]:
        """The content and calls that ``text`` completes (possibly none yet)."""
        self._buffer += text
        return self._scan(final=False)

    def finish(self) -> list[Piece]:
        """What is left at the end: the last block's calls, or held-back text and an unfinished block
        as content (trailing blanks only when no call was made)."""
        out = self._scan(final=True)
        rest, self._buffer = self._buffer, ""
        if self._open is not None:
            rest, self._open = self._open[1] + rest, None
        if rest.strip() or (rest and not self.calls):
            out.append(rest)
        return out

    def _scan(self, final: bool) -> list[Piece]:
        out: list[Piece] = []
        while self._step(out, final):
            pass
        return [p for p in out if p != ""]

    def _step(self, out: list[Piece], final: bool) -> bool:
        """One move: a block closed, a block opened, or the safe content given out. False: nothing
        more can be read until more text comes (or, ``final``, ever)."""
        if self._after_call:
            self._buffer = self._buffer.lstrip()
        if self._open is not None:
            return self._close(*self._open, out, final)
        if not self._said and self._bare(final):
            return self._open is not None
        found = self._next_marker()
        if found is None:
            out.append(self._safe())
            return False
        at, marker, fmt = found
        self._content(out, self._buffer[:at].rstrip())  # blanks before a block are dropped
        self._buffer, self._open = self._buffer[at + len(marker) :], (fmt, marker)
        return True

    def _bare(self, final: bool) -> bool:
        """Before anything is said: True while blanks are all there is (held), or when a bare block
        opens at the first ``{`` (then ``_open`` is set)."""
        lead = self._buffer.lstrip()
        if not lead:
            return not final
        bare = next((f for f in self._formats if f.bare_start), None)
        if lead[0] == "{" and bare is not None:
            self._open = (bare, "")
            return True
        return False

    def _close(self, fmt: CallFormat, marker: str, out: list[Piece], final: bool) -> bool:
        length = fmt.block_length(self._buffer, final)
        if length is None:
            return False
        block, self._buffer, self._open = self._buffer[:length], self._buffer[length:], None
        calls = fmt.calls(block, self._names)
        if calls is None:
            self._content(out, marker + block)
        else:
            out.extend(calls)
            self.calls += len(calls)
            self._said = self._after_call = True
        return True

    def _content(self, out: list[Piece], text: str) -> None:
        if text:
            out.append(text)
            self._said, self._after_call = True, False

    def _next_marker(self) -> tuple[int, str, CallFormat] | None:
        found = [(at, m, f) for m, f in self._openers if (at := self._buffer.find(m)) >= 0]
        return min(found, key=lambda x: x[0]) if found else None

    def _safe(self) -> str:
        """Content that cannot be part of a marker; the rest (a possible marker's start, trailing
        blanks) stays in the buffer (all of it is given out at the end)."""
        keep = max((partial_tag(self._buffer, m) for m, _ in self._openers), default=0)
        head = self._buffer[: len(self._buffer) - keep]
        stripped = head.rstrip()
        self._buffer = self._buffer[len(stripped) :]
        if stripped:
            self._said, self._after_call = True, False
        return stripped
