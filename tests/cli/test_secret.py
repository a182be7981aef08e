"""The deployment secret at start-up: made up for a local cluster, required for a multi-node one
unless the operator says ``--insecure``, and never weak."""

from __future__ import annotations

import logging
import os
import subprocess

import pytest

from kvgate.cli.secret_args import MIN_SECRET_BYTES, deployment_secret


def test_a_local_cluster_gets_a_fresh_strong_secret() -> None:
    first, second = (deployment_secret(None, local=True, insecure=False) for _ in range(2))
    assert first.source == "generated"
    assert len(first.value) >= 32
    assert first.value != second.value


def test_a_multi_node_start_without_a_secret_is_refused_and_says_why() -> None:
    with pytest.raises(ValueError, match=r"KVGATE_HASH_SECRET.*--insecure.*pose as a worker"):
        deployment_secret(None, local=False, insecure=False)
    with pytest.raises(ValueError, match="KVGATE_HASH_SECRET"):
        deployment_secret("", local=False, insecure=False)


def test_insecure_runs_without_a_secret_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        secret = deployment_secret(None, local=True, insecure=True)
    assert secret.value == b""
    assert "INSECURE" in caplog.text


def test_a_short_secret_is_refused_unless_insecure() -> None:
    short = "x" * (MIN_SECRET_BYTES - 1)
    with pytest.raises(ValueError, match="at least"):
        deployment_secret(short, local=True, insecure=False)
    assert deployment_secret(short, local=False, insecure=True).value == short.encode()
    assert deployment_secret("y" * MIN_SECRET_BYTES, local=False, insecure=False).source == "environment"


@pytest.mark.parametrize(
    "command",
    [
        ["gateway", "--redis-url", "redis://127.0.0.1:1"],
        ["workers", "--redis-url", "redis://127.0.0.1:1"],
        ["up", "--redis-url", "redis://127.0.0.1:1"],
        ["up", "--ray-address", "127.0.0.1:1"],
    ],
    ids=["gateway", "workers", "up-redis", "up-joined"],
)
def test_multi_node_commands_refuse_to_start_without_a_secret(command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KVGATE_HASH_SECRET"}
    done = subprocess.run(["kvgate", *command], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr
    assert "needs a secret" in done.stderr
    assert "--insecure" in done.stderr
