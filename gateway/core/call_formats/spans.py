"""Where JSON values end in a model's text, found without parsing them: brackets are counted outside
strings. Enough to know where a block of calls ends; whether it is valid JSON is decided by
``json.loads`` of the block."""

from __future__ import annotations

_BLANK = " \t\r\n"


def value_end(text: str, start: int) -> int | None:
    """The index just past the object or array that opens at ``text[start]``; None when ``text`` ends
    inside it. ``text[start]`` must be ``{`` or ``[``."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def skip_blanks(text: str, at: int) -> int:
    """The index of the first non-blank character at or after ``at`` (``len(text)``: none)."""
    while at < len(text) and text[at] in _BLANK:
        at += 1
    return at


def object_run(text: str, separator: str) -> tuple[int, bool]:
    """The objects that ``text`` starts with (after blanks), separated by ``separator``: the index just
    past the last complete one (0: none), and whether the text ended while the run could go on (inside
    an object, or after a separator or blanks)."""
    end, at = 0, skip_blanks(text, 0)
    while at < len(text) and text[at] == "{":
        closed = value_end(text, at)
        if closed is None:
            return end, True
        end, at = closed, skip_blanks(text, closed)
        if at < len(text) and text[at] == separator:
            at = skip_blanks(text, at + 1)
        elif at < len(text):
            return end, False
    return end, at == len(text)


def split_objects(text: str, separator: str) -> list[str] | None:
    """The objects of ``text`` (blanks around them and one trailing ``separator`` allowed), each as
    written; None when ``text`` is anything else."""
    objects, at = [], skip_blanks(text, 0)
    while at < len(text):
        if text[at] != "{" or (closed := value_end(text, at)) is None:
            return None
        objects.append(text[at:closed])
        at = skip_blanks(text, closed)
        if at < len(text):
            if text[at] != separator:
                return None
            at = skip_blanks(text, at + 1)
    return objects or None
