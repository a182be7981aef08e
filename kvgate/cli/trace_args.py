"""The options that say how to read a trace file (``kvgate simulate``, ``kvgate plan --trace``)."""

from __future__ import annotations

import argparse

from kvgate.sim.trace_format import AUTO, CHOICES, FORMATS

_FORMAT_HELP = ", ".join(f.describe(f.block_tokens) for f in FORMATS.values())


def add_trace_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--trace-format`` (:mod:`kvgate.sim.trace_format`) and ``--trace-block-tokens``."""
    parser.add_argument("--trace-format", choices=CHOICES, default=AUTO,
                        help=f"{_FORMAT_HELP}; auto: bailian for records with chat_id and "
                             "parent_chat_id (Qwen-Bailian traces), else mooncake")  # fmt: skip
    parser.add_argument("--trace-block-tokens", type=int, default=None,
                        help="tokens per hash id (default: the format's)")  # fmt: skip


def trace_options(trace_format: str, block_tokens: int) -> list[str]:
    """The options that read a trace as it was read: its format and tokens per hash id."""
    return ["--trace-format", trace_format, "--trace-block-tokens", str(block_tokens)]
