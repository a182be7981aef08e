"""``KEY=VALUE`` overrides of the routing cost model, for trying parameters in the simulator."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kvgate.gateway.routing.config import RoutingConfig


def routing_config(pairs: Sequence[str], base: RoutingConfig | None = None) -> RoutingConfig:
    """``base`` (default: the defaults) with each ``KEY=VALUE`` applied, typed like the field's
    default. ValueError for a malformed pair, an unknown key, or a value the config rejects."""
    config = base or RoutingConfig()
    known = {f.name: type(getattr(config, f.name)) for f in dataclasses.fields(config)}
    changes: dict[str, float | int] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in known:
            raise ValueError(f"--routing-config wants KEY=VALUE with KEY one of {', '.join(known)}: {pair!r}")
        try:
            changes[key] = known[key](value)
        except ValueError:
            raise ValueError(f"--routing-config {key}: not a {known[key].__name__}: {value!r}") from None
    return dataclasses.replace(config, **changes)
