"""A second Ctrl-C interrupts a command at once: it ends with status 130 and one line, not a traceback
(the first one asks a server to stop gracefully: ``kvgate.cluster.shutdown``)."""

from __future__ import annotations

import argparse

import pytest

from kvgate.cli import hash_cmd
from kvgate.cli.main import main


def test_an_interrupted_command_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(_args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(hash_cmd, "run", interrupted)
    assert main(["hash"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "kvgate hash: interrupted\n"
    assert captured.out == ""
