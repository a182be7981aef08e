"""``KEY=VALUE`` overrides of the routing cost model: ``--routing-config`` of ``kvgate simulate``,
``kvgate up`` and ``kvgate gateway``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kvgate.gateway.routing.config import RoutingConfig


def routing_config(pairs: Sequence[str], base: RoutingConfig | None = None) -> RoutingConfig:
    """``base`` (default: the defaults) with each ``KEY=VALUE`` applied, typed like the field's
    default. ValueError for a malformed pair, an unknown key, or a value the config rejects (out of
    range, not finite), naming the flag."""
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
            kind = "an integer" if known[key] is int else "a number"
            raise ValueError(f"--routing-config {key}: not {kind}: {value!r}") from None
    try:
        return dataclasses.replace(config, **changes)
    except ValueError as exc:
        raise ValueError(f"--routing-config: {exc}") from None


def changed(config: RoutingConfig) -> dict[str, float | int]:
    """The fields of ``config`` that differ from the defaults, by name (what a server announces)."""
    default = RoutingConfig()
    return {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if getattr(config, f.name) != getattr(default, f.name)
    }


def routing_summary(policy: str, config: RoutingConfig) -> str:
    """One line for a server's start-up message: the policy, and the parameters set away from
    their defaults (``policy (default parameters)`` when none is)."""
    set_ = changed(config)
    if not set_:
        return f"{policy} (default parameters)"
    return f"{policy}, " + ", ".join(f"{name}={value}" for name, value in set_.items())
