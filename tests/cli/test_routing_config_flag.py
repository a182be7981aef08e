"""``--routing-config KEY=VALUE`` on ``kvgate up`` and ``kvgate gateway``: the routing cost model's
parameters reach the gateway a command builds (its decisions use them), and a bad one stops the
command with an error naming the flag, before anything starts."""

from __future__ import annotations

import httpx
import pytest

from kvgate.cli.cluster_args import settings_from
from kvgate.cli.main import build_parser, main
from kvgate.cluster import stack
from kvgate.cluster.settings import ClusterSettings
from kvgate.cluster.stack import _gateway_settings
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.routing.config import RoutingConfig
from kvgate.gateway.routing.overrides import routing_summary
from tests.support.live_gateway import MODEL, running_gateway


def _settings(command: str, *flags: str) -> ClusterSettings:
    extra = ["--redis-url", "redis://127.0.0.1:1/0", "--insecure"] if command == "gateway" else []
    return settings_from(build_parser().parse_args([command, *extra, *flags]), local=command == "up")


@pytest.mark.parametrize("command", ["up", "gateway"])
def test_the_parameters_reach_the_gateway_settings(command: str) -> None:
    flags = ("--routing-config", "compute_weight=10", "--routing-config", "prefill-tokens-per-s=20000")
    routing = _gateway_settings(_settings(command, *flags)).routing
    assert (routing.compute_weight, routing.prefill_tokens_per_s) == (10.0, 20_000.0)
    assert routing.session_weight == RoutingConfig().session_weight  # the others keep their defaults
    assert _gateway_settings(_settings(command)).routing == RoutingConfig()


async def test_the_gateway_decides_with_them(tokenizer: Tokenizer) -> None:
    """A cold prompt's estimated TTFT is its prefill at the configured rate: ten times slower
    prefill, ten times the estimate (the same gateway `kvgate up` builds, over scripted workers)."""
    body = {"model": MODEL, "prompt": "the routing cost model " * 200}
    estimates = []
    for flags in ((), ("--routing-config", "prefill_tokens_per_s=1000")):
        routing = _gateway_settings(_settings("up", *flags)).routing
        async with running_gateway(tokenizer, routing=routing) as live, httpx.AsyncClient() as http:
            explained = (await http.post(f"{live.url}/v1/route", json=body)).json()
        estimates.append(explained["estimated_ttft_s"])
    assert estimates[1] == pytest.approx(10 * estimates[0], rel=0.05)
    assert estimates[1] > explained["prompt_tokens"] / 1000 * 0.9


@pytest.mark.parametrize(("pair", "message"), [
    ("compute_weight=nan", "--routing-config: compute_weight must be a finite number"),
    ("prefill_tokens_per_s=inf", "--routing-config: prefill_tokens_per_s must be a finite number"),
    ("decode_step_s=-0.1", "--routing-config: decode_step_s must be >= 0"),
    ("prefill_tokens_per_s=0", "--routing-config: prefill_tokens_per_s must be positive"),
    ("compute_weight", "--routing-config wants KEY=VALUE"),
    ("no_such_knob=1", "--routing-config wants KEY=VALUE"),
    ("balance_abs_threshold=1.5", "--routing-config balance_abs_threshold: not an integer"),
])  # fmt: skip
def test_a_bad_parameter_stops_the_command_naming_the_flag(
    pair: str, message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def started(_settings: ClusterSettings) -> int:
        raise AssertionError("the cluster was started with a bad parameter")

    monkeypatch.setattr(stack, "run_up", started)
    assert main(["up", "--routing-config", pair]) == 2
    err = capsys.readouterr().err
    assert f"kvgate up: error: {message}" in err
    assert "kvgate is ready" not in err


def test_the_start_up_line_names_what_was_set() -> None:
    assert routing_summary("kvgate", RoutingConfig()) == "kvgate (default parameters)"
    tuned = _settings("up", "--routing-config", "compute_weight=10").routing
    assert routing_summary("kvgate", tuned) == "kvgate, compute_weight=10.0"
