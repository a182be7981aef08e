"""``--lora ID=PATH[@I,J]``: each worker's spec carries the adapters placed on it (every worker without
``@``); malformed values and placements on workers that do not exist are refused with the form."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvgate.cli.cluster_args import settings_from
from kvgate.cli.main import build_parser
from kvgate.cluster.worker_specs import actor_specs


def _specs(count: int, *flags: str) -> list[tuple[tuple[str, Path], ...]]:
    settings = settings_from(build_parser().parse_args(["up", *flags]), local=True)
    return [spec.config.adapters for spec in actor_specs(settings, count, gpu=False)]


def test_adapters_reach_the_workers_they_are_placed_on() -> None:
    specs = _specs(3, "--lora", "sql=/lora/sql@0,2", "--lora", "all=/lora/all", "--lora", "b=/x@y/b@1")
    assert specs == [
        (("sql", Path("/lora/sql")), ("all", Path("/lora/all"))),
        (("all", Path("/lora/all")), ("b", Path("/x@y/b"))),
        (("sql", Path("/lora/sql")), ("all", Path("/lora/all"))),
    ]
    assert _specs(2) == [(), ()]


@pytest.mark.parametrize("value", ["sql", "=/p", "sql=", "a:b=/p", "-x=/p"])
def test_a_malformed_value_is_refused_with_the_form(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", "--lora", value])
    assert "--lora" in capsys.readouterr().err


def test_a_placement_beyond_the_workers_or_a_repeated_id_is_refused() -> None:
    with pytest.raises(ValueError, match="there is no worker 2 "):
        _specs(2, "--lora", "sql=/p@2")
    with pytest.raises(ValueError, match="ids must differ"):
        _specs(2, "--lora", "sql=/p", "--lora", "sql=/q")
