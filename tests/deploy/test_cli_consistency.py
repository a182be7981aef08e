"""Every `kvgate` command line in deploy/ uses a real subcommand and real flags: the parser's, for the
commands that exist now; tests/deploy/planned.py's, for the cluster layer's commands still being built.
The defaults and names the deploy files rely on agree with the code where the code has them."""

from __future__ import annotations

import argparse
import re
from urllib.parse import urlparse

import pytest

from kvgate.cli.cache_args import SECRET_ENV
from kvgate.cli.main import COMMANDS, build_parser
from kvgate.cli.redis_args import REDIS_URL_ENV
from kvgate.cluster.settings import PORTS_PER_NODE, KVSizing
from kvgate.gateway.settings import Limits
from kvgate.index.settings import IndexSettings
from kvgate.proto.layout import DEFAULT_BLOCK_SIZE, DEFAULT_CHUNK_SIZE
from kvgate.workers.kv.config import KVCacheConfig
from tests.deploy import planned
from tests.deploy.files import DEPLOY, ROOT, RUNBOOK, all_invocations, deploy_files


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _known_flags(command: str) -> frozenset[str]:
    parsers = _subparsers()
    if command in parsers:
        return frozenset(parsers[command]._option_string_actions)
    return planned.PLANNED_FLAGS[command]


def test_deploy_files_do_run_kvgate_commands() -> None:
    sources = {i.source.split()[0] for i in all_invocations()}
    assert {"deploy/Dockerfile", "compose", "Deployment/kvgate-gateway", "RayJob/kvgate-workers"} <= sources
    assert {"deploy/ray/cluster.yaml", "deploy/README.md"} <= sources
    assert {i.command for i in all_invocations()} >= {"up", "workers", "gateway", "index"}


@pytest.mark.parametrize("call", all_invocations(), ids=lambda i: f"{i.source}: kvgate {i.command}")
def test_every_command_and_flag_exists_or_is_planned(call) -> None:
    assert call.command in set(COMMANDS) | set(planned.PLANNED_FLAGS), f"unknown subcommand {call.command}"
    unknown = set(call.flags) - _known_flags(call.command) - {"--help"}
    assert not unknown, f"kvgate {call.command} has no {sorted(unknown)}"


def test_gateway_port_defaults_agree_with_the_code() -> None:
    explain = _subparsers()["explain"]
    assert urlparse(explain.get_default("url")).port == planned.HTTP_PORT
    for command in ("gateway", "up"):
        if command in _subparsers():  # once the cluster layer has landed
            parser = _subparsers()[command]
            assert parser.get_default("port") == planned.HTTP_PORT
            assert parser.get_default("grpc_port") == planned.GRPC_PORT


def test_the_gateway_serves_the_paths_the_probes_and_prometheus_use() -> None:
    app = (ROOT / "gateway" / "http_api" / "app.py").read_text()
    assert f'@app.get("{planned.HEALTH_PATH}"' in app
    routes = re.findall(r'@app\.get\("(/[^"]*metrics[^"]*)"', app)
    assert routes in ([], [planned.METRICS_PATH]), "Prometheus scrapes /metrics"


def test_the_secret_variable_is_the_one_the_code_reads() -> None:
    assert SECRET_ENV == "KVGATE_HASH_SECRET"
    for name in ("compose.yaml", "kuberay/secret.yaml", "ray/kvgate.env.example"):
        path = DEPLOY / name
        assert SECRET_ENV in path.read_text(), path
    for path in deploy_files():
        assert not re.search(r"--(hash-)?secret\b", path.read_text()), f"{path}: the secret is never a flag"


def test_the_redis_url_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Redis URL holds the password and a command line is public, so the deploy files never pass
    --redis-url: the commands that need one default to $KVGATE_REDIS_URL, which the files set."""
    assert REDIS_URL_ENV == "KVGATE_REDIS_URL"
    url = "redis://:password@redis:6379/0"
    monkeypatch.setenv(REDIS_URL_ENV, url)
    for command in ("up", "workers", "gateway", "index"):
        assert build_parser().parse_args([command]).redis_url == url, command
    monkeypatch.delenv(REDIS_URL_ENV)
    for command in ("workers", "gateway", "index"):
        with pytest.raises(SystemExit):  # required: a bare command needs the variable
            build_parser().parse_args([command])
    passing = [f"{i.source}: kvgate {i.command}" for i in all_invocations() if "--redis-url" in i.flags]
    assert not passing


def test_the_runbook_numbers_are_the_code_defaults() -> None:
    text = RUNBOOK.read_text()
    index, kv = IndexSettings(), KVCacheConfig(num_gpu_blocks=1)
    assert DEFAULT_CHUNK_SIZE == 128
    assert DEFAULT_BLOCK_SIZE == 16
    assert DEFAULT_CHUNK_SIZE % DEFAULT_BLOCK_SIZE == 0
    expected = {
        f"chunks of {DEFAULT_CHUNK_SIZE} tokens": True,
        f"blocks of {DEFAULT_BLOCK_SIZE}": True,
        f"`ttl_s` = {kv.ttl_s:g}": True,
        f"`cpu_ttl_s` ({kv.cpu_ttl_s:g} s)": True,
        f"`key_slack_s` ({index.key_slack_s:g} s)": True,
        f"`heartbeat_ttl_s` ({index.heartbeat_ttl_s:g} s)": True,
        f"`pending_ttl_s` ({index.pending_ttl_s:g} s)": True,
        f"{index.timeout_s * 1000:g} ms": True,
    }
    missing = [needle for needle in expected if needle not in text]
    assert not missing, f"deploy/README.md disagrees with the code defaults: {missing}"


def test_the_runbook_sizing_example_is_right() -> None:
    """SmolLM2-135M: 3 KV heads x 64 dims, 30 layers, bf16 -> 23,040 B per token, 360 KiB per block."""
    per_token = 2 * 3 * 64 * 2 * 30
    text = RUNBOOK.read_text()
    assert f"{per_token:,} B" in text
    assert f"{per_token * DEFAULT_BLOCK_SIZE // 1024} KiB" in text
    assert re.search(r"2·8·128·2·32 = 128 KiB", text)  # Llama-3.1-8B: 131,072 B per token


def test_worker_port_defaults_agree_with_the_deploy_files() -> None:
    """``kvgate workers`` (deployments) takes the node's ports from the bases deploy/ names, up to the
    ports the images expose; ``kvgate up`` (one machine) takes free ones."""
    workers, up = _subparsers()["workers"], _subparsers()["up"]
    assert workers.get_default("worker_port") == planned.WORKER_GRPC_BASE
    assert workers.get_default("worker_metrics_port") == planned.WORKER_METRICS_BASE
    assert (up.get_default("worker_port"), up.get_default("worker_metrics_port")) == (0, 0)
    assert PORTS_PER_NODE == planned.WORKER_PORTS_PER_NODE


def test_the_readme_states_the_context_length_up_serves() -> None:
    """The README's limits table gives the context window ``kvgate up`` serves by default (the
    ``--max-model-len`` default of ``up`` and ``gateway``, from ``KVSizing``), the one a ``Limits()``
    built in code has, and the output room ``kvgate up`` leaves."""
    served, limits = KVSizing().max_model_len, Limits()
    assert {_subparsers()[c].get_default("max_model_len") for c in ("up", "gateway")} == {served}
    window = r"`--max-model-len`, (\d+) tokens by default \(a `Limits\(\)` built in code: (\d+)\)"
    assert _readme_numbers("context_window", window) == (served, limits.context_window)
    room = min(limits.max_output_tokens, served - 1)
    output = r"\| (\d+), at most the context window − 1 \((\d+) under `kvgate up`'s default\)"
    assert _readme_numbers("max_output_tokens", output) == (limits.max_output_tokens, room)


def _readme_numbers(limit: str, pattern: str) -> tuple[int, ...]:
    """The numbers ``pattern`` captures in the README's limits-table row of ``limit`` (a ``Limits``
    field); AssertionError naming the row if it has no such text."""
    lines = (ROOT / "README.md").read_text().splitlines()
    (row,) = [line for line in lines if line.startswith(f"| `{limit}`")]
    found = re.search(pattern, row)
    assert found, f"README's {limit} row no longer matches {pattern!r}: {row}"
    return tuple(int(n) for n in found.groups())
