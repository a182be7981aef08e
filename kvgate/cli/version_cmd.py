"""``kvgate version``."""

from __future__ import annotations

import argparse

import kvgate

HELP = "print the kvgate version"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser


def run(args: argparse.Namespace) -> int:
    del args
    print(kvgate.__version__)
    return 0
