"""Byte sizes on the command line: ``80GiB``, ``24GB``, ``512M`` (``kvgate plan``, ``--kv-memory``)."""

from __future__ import annotations

import argparse
import re

_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}  # fmt: skip
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*")


def parse_bytes(text: str) -> int:
    """``80GiB``, ``24GB``, ``512M`` (K/M/G/T alone are binary), ``1024``: bytes. ValueError otherwise
    (argparse turns it into a usage error naming the flag)."""
    match = _SIZE.fullmatch(str(text))
    if match is None or match[2].lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (e.g. 80GiB, 24GB, 512MiB)")
    return int(float(match[1]) * _UNITS[match[2].lower()])


def byte_size(text: str) -> int:
    """:func:`parse_bytes` for an argparse ``type``: a bad size is a usage error that says why."""
    try:
        size = parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if size < 1:
        raise argparse.ArgumentTypeError(f"a memory size must be positive, got {text!r}")
    return size
