"""``--help`` of every ``kvgate`` subcommand shows every option's default (issue 21: "--help shows no
defaults"), without "(default: None)" noise and without printing a secret taken from the environment."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kvgate.cli.help_format import shows_default
from kvgate.cli.main import COMMANDS, build_parser


def subparsers() -> dict[str, object]:
    parser = build_parser()
    return dict(parser._subparsers._group_actions[0].choices)  # name -> its ArgumentParser


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_with_a_default_shows_it(command: str) -> None:
    sub = subparsers()[command]
    text = " ".join(sub.format_help().split())  # argparse wraps lines
    for action in sub._actions:
        if shows_default(action):
            stated = "default" in (action.help or "").replace("%(default)s", "").lower()
            assert stated or f"(default: {action.default})" in text, (command, action.option_strings)
    assert "(default: None)" not in text
    assert "(default: False)" not in text
    assert "(default: [])" not in text  # a repeatable option given nothing


def test_a_zero_default_is_still_shown() -> None:
    text = " ".join(subparsers()["simulate"].format_help().split())
    assert "CPU tier per worker (0: none) (default: 0)" in text


def test_up_help_as_a_user_sees_it() -> None:
    env = {**os.environ, "KVGATE_REDIS_URL": "redis://:hunter2@redis.internal:6379/0"}
    out = subprocess.run([sys.executable, "-m", "kvgate.cli.main", "up", "--help"],
                         capture_output=True, text=True, timeout=60, env=env, check=True)  # fmt: skip
    text = " ".join(out.stdout.split())
    for shown in ("--port PORT HTTP: OpenAI / Anthropic API (default: 8000)", "(default: 4096)",
                  "(default: 50051)", "(default: HuggingFaceTB/SmolLM2-135M-Instruct)"):  # fmt: skip
        assert shown in text
    assert "hunter2" not in out.stdout  # a default taken from the environment is named, not shown
