"""The JSON object of one tool call, ``{"name": ..., "arguments": {...}}``, read as it streams in.

:class:`CallObjectScanner` walks the object's top level character by character (keys in any order,
other keys skipped): it knows the function's ``name`` as soon as its string is complete, and gives the
text of the ``arguments`` object as written, piece by piece, the moment each character arrives. Fed
the same text, in whatever pieces, it gives the same arguments text: a streamed call's fragments
concatenate to what the whole block's reading (:func:`raw_arguments`) finds. It checks shape only as
far as it must to find those two; whether the block is valid JSON is decided elsewhere
(``json.loads`` of the whole block).
"""

from __future__ import annotations

import json
from enum import Enum, auto

_BLANK = " \t\r\n"


class _At(Enum):
    OPEN = auto()  # before the object's "{"
    KEY = auto()  # before a key (or the closing "}")
    IN_KEY = auto()
    COLON = auto()
    VALUE = auto()  # before a value
    IN_VALUE = auto()
    AFTER_VALUE = auto()  # before "," or "}"
    CLOSED = auto()
    BAD = auto()  # not the shape of a call: nothing more is read


class CallObjectScanner:
    """One call object's top level; mutable. ``name``: the function's name once read (None before,
    or when it is not a string); ``arguments_done``: the arguments object is complete; ``bad``: the
    text cannot be a call object. ``key``: the member that holds the arguments (Llama 3 writes
    ``parameters``)."""

    def __init__(self, key: str = "arguments") -> None:
        self.key = key
        self.name: str | None = None
        self.arguments_done = False
        self._at = _At.OPEN
        self._raw = ""  # the key or value being read
        self._key: str | None = None
        self._depth = 0  # open brackets in the value (strings aside)
        self._in_string = False
        self._escaped = False

    @property
    def bad(self) -> bool:
        return self._at is _At.BAD

    @property
    def closed(self) -> bool:
        return self._at is _At.CLOSED

    def feed(self, text: str) -> str:
        """Reads ``text``; returns the part of it that belongs to the ``arguments`` object."""
        out = []
        for char in text:
            if self._at is _At.IN_VALUE and self._in_arguments():
                out.append(char)
            self._step(char)
            if self._at is _At.IN_VALUE and self._in_arguments() and self._raw == char == "{":
                out.append(char)  # the arguments' opening brace
        return "".join(out)

    def _in_arguments(self) -> bool:
        return self._key == self.key and self._raw.startswith("{") and not self.arguments_done

    def _step(self, char: str) -> None:
        at = self._at
        if at is _At.IN_VALUE:
            self._value_char(char)
        elif at is _At.IN_KEY:
            self._key_char(char)
        elif char in _BLANK or at in (_At.CLOSED, _At.BAD):
            return
        elif at is _At.OPEN:
            self._expect(char == "{", _At.KEY)
        elif at is _At.KEY:
            self._key_start(char)
        elif at is _At.COLON:
            self._expect(char == ":", _At.VALUE)
        elif at is _At.VALUE:
            self._value_start(char)
        else:  # AFTER_VALUE
            self._expect(char in ",}", _At.KEY if char == "," else _At.CLOSED)

    def _expect(self, ok: bool, then: _At) -> None:
        self._at = then if ok else _At.BAD

    def _key_start(self, char: str) -> None:
        if char == "}":
            self._at = _At.CLOSED
        else:
            self._expect(char == '"', _At.IN_KEY)
            self._raw, self._escaped = char, False

    def _key_char(self, char: str) -> None:
        self._raw += char
        if self._string_ends(char):
            self._key = _string(self._raw)
            self._at = _At.COLON if self._key is not None else _At.BAD

    def _value_start(self, char: str) -> None:
        self._raw, self._at = char, _At.IN_VALUE
        self._depth = int(char in "{[")
        self._in_string, self._escaped = char == '"', False
        if self._depth == 0 and not self._in_string and char in ",}]:":
            self._at = _At.BAD

    def _value_char(self, char: str) -> None:
        opened = self._raw[0]
        if opened not in '"{[' and (char in _BLANK or char in ",}"):
            self._value_done()  # a number, true, false or null ends before this character
            self._step(char)
            return
        self._raw += char
        if self._in_string:
            if self._string_ends(char):
                self._in_string = False
                if opened == '"':
                    self._value_done()
        elif char == '"':
            self._in_string, self._escaped = True, False
        elif char in "{[" or char in "}]":
            self._depth += 1 if char in "{[" else -1
            if self._depth == 0:
                self._value_done()

    def _string_ends(self, char: str) -> bool:
        """True when ``char`` closes the string being read (an unescaped quote)."""
        if self._escaped:
            self._escaped = False
            return False
        if char == "\\":
            self._escaped = True
            return False
        return char == '"'

    def _value_done(self) -> None:
        if self._key == "name" and self.name is None:
            self.name = _string(self._raw)
        elif self._key == self.key and self._raw.startswith("{"):
            self.arguments_done = True
        self._at = _At.AFTER_VALUE


def _string(raw: str) -> str | None:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


def raw_arguments(body: str, key: str = "arguments") -> str | None:
    """The ``key`` object of call object ``body`` as written (None when it has none)."""
    scanner = CallObjectScanner(key)
    text = scanner.feed(body)
    return text if scanner.arguments_done else None
