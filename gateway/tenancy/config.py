"""Tenants and their keys from a TOML file (``--api-keys``) or the ``KVGATE_API_KEYS`` variable.

File format::

    [[tenant]]
    name = "acme"
    keys = ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
    requests_per_minute = 600          # optional
    tokens_per_minute = 2000000        # optional (prompt + max_tokens)
    shared_namespaces = ["public"]     # optional: shared cache namespaces it may opt into

Variable format (keys only, no limits): ``KVGATE_API_KEYS="acme=sha256:<hex>,beta=sha256:<hex>"``.
Keys are always given by their hash (``kvgate keys new`` / ``kvgate keys hash``); a plain key is refused.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from kvgate.gateway.tenancy.keys import KeyRing
from kvgate.gateway.tenancy.tenant import RateLimit, Tenant

ENV_VAR = "KVGATE_API_KEYS"
_FIELDS = {"name", "keys", "requests_per_minute", "tokens_per_minute", "shared_namespaces"}


def load_key_ring(path: Path) -> KeyRing:
    """The tenants of a TOML file; ValueError naming the problem for a malformed one."""
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read the API key file {path}: {exc}") from exc
    tables = document.get("tenant")
    if not isinstance(tables, list) or not tables:
        raise ValueError(f"{path}: expected one or more [[tenant]] tables")
    entries: list[tuple[str, Tenant]] = []
    names: set[str] = set()
    for table in tables:
        tenant, keys = _tenant(table)
        if tenant.name in names:
            raise ValueError(f"{path}: tenant {tenant.name!r} is defined twice")
        names.add(tenant.name)
        entries.extend((key, tenant) for key in keys)
    return KeyRing(entries)


def key_ring_from_env(value: str) -> KeyRing:
    """The tenants of a ``name=sha256:<hex>,...`` string."""
    entries = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, sep, key = item.partition("=")
        if not sep:
            raise ValueError(f"{ENV_VAR}: expected name=sha256:<hex>, got {item[:24]!r}")
        entries.append((key.strip(), Tenant(name.strip())))
    return KeyRing(entries)


def _tenant(table: Any) -> tuple[Tenant, list[str]]:
    if not isinstance(table, dict):
        raise ValueError("each [[tenant]] must be a table")
    unknown = set(table) - _FIELDS
    if unknown:
        raise ValueError(f"tenant {table.get('name')!r}: unknown fields {sorted(unknown)}")
    keys = table.get("keys")
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise ValueError(f"tenant {table.get('name')!r}: 'keys' must be a non-empty list of strings")
    rate = RateLimit(table.get("requests_per_minute"), table.get("tokens_per_minute"))
    shared = table.get("shared_namespaces", [])
    if not isinstance(shared, list) or not all(isinstance(n, str) for n in shared):
        raise ValueError(f"tenant {table.get('name')!r}: 'shared_namespaces' must be a list of strings")
    shared = frozenset(shared)
    return Tenant(str(table.get("name", "")), rate, shared), keys


def key_ring(path: Path | None, env_value: str | None) -> KeyRing | None:
    """The key ring of ``path`` if given, else of the variable's value if set, else None (no auth)."""
    if path is not None:
        return load_key_ring(path)
    if env_value:
        return key_ring_from_env(env_value)
    return None
