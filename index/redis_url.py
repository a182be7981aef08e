"""The Redis URLs the index accepts, checked before anything connects. Every message names the URL
with its password masked (:func:`mask_url`).

::

    redis://[user:password@]host[:port][/db][?option=value&...]    one server, or any node of a Cluster
    rediss://...                                                   the same over TLS
    unix://[user:password@]/path/to/socket[?db=N&...]              a server on this machine
    redis+sentinel://[user:password@]host[:port][,host[:port]...]/service[/db][?option=value&...]
    rediss+sentinel://...                                          the same, TLS to the Sentinels and primary

Sentinels listen on port 26379 unless a port is given. In a Sentinel URL ``user:password`` are those
of the primary; Sentinels that require credentials of their own take them as the options
``sentinel_username`` and ``sentinel_password``. Options are redis-py's connection options
(``ssl_ca_certs=/path/ca.pem``, ``socket_timeout=0.5``, ...); in a Sentinel URL they apply to the
Sentinels and the primary alike, except ``db``. Userinfo and values are percent-encoded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from redis.asyncio.connection import parse_url

SENTINEL_PORT = 26379
NODE_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
_SENTINEL_AUTH = ("sentinel_username", "sentinel_password")
_SECRET_OPTION = re.compile(r"(?i)([?&][^=&#]*password[^=&#]*=)[^&#]*")


class RedisUrlError(ValueError):
    """A Redis URL that is malformed or cannot be used; the message names it, password masked."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{mask_url(url)}: {reason}")


@dataclass(frozen=True, slots=True)
class SentinelUrl:
    """A parsed ``redis+sentinel://`` URL: where the Sentinels are, which service they watch, and the
    redis-py connection options for the primary and for the Sentinels."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    primary: Mapping[str, Any]
    sentinel: Mapping[str, Any]


def mask_url(url: str) -> str:
    """``url`` with its password and the value of any ``*password*`` option replaced by ``***``.
    Everything up to the last ``@`` counts as userinfo (all masked when it has no ``:``), so an
    unencoded ``@``, ``/`` or ``?`` in a password cannot leak it; never fails, whatever the string."""
    scheme, sep, rest = url.partition("://") if "://" in url else ("", "", url)
    userinfo, at, rest = rest.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:***@{rest}" if colon else f"***@{rest}"
    return scheme + sep + _SECRET_OPTION.sub(r"\1***", rest)


def is_sentinel_url(url: str) -> bool:
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


def node_options(url: str) -> dict[str, Any]:
    """redis-py's connection options for a ``redis://``, ``rediss://`` or ``unix://`` URL; raises
    RedisUrlError for anything else or anything malformed (no host, bad port, bad database...)."""
    parts = _split(url)
    if parts.scheme not in NODE_SCHEMES:
        forms = ", ".join(f"{s}://" for s in (*NODE_SCHEMES, *SENTINEL_SCHEMES))
        raise RedisUrlError(url, f"unknown scheme {parts.scheme!r}; expected one of {forms}")
    if parts.scheme == "unix":
        if not parts.path:
            raise RedisUrlError(url, "no socket path (unix:///path/to/redis.sock)")
    else:
        _check_server(url, parts)
    return _parse(url, url)


def parse_sentinel_url(url: str) -> SentinelUrl:
    """Parses a ``redis+sentinel://`` or ``rediss+sentinel://`` URL; RedisUrlError if malformed."""
    parts = _split(url)
    if parts.scheme not in SENTINEL_SCHEMES:
        raise RedisUrlError(url, f"not a Sentinel URL ({' or '.join(SENTINEL_SCHEMES)})")
    service, db = _service_and_db(url, parts.path)
    options = _parse(url, f"redis://sentinel/?{parts.query}")  # the query's typed options only
    del options["host"]
    if parts.scheme == "rediss+sentinel":
        options["ssl"] = True
    own = {key.removeprefix("sentinel_"): options.pop(key) for key in _SENTINEL_AUTH if key in options}
    primary = {**_credentials(parts), "db": db, **options}
    sentinel = {**{k: v for k, v in options.items() if k != "db"}, **own}
    return SentinelUrl(_sentinel_hosts(url, parts.netloc), service, primary, sentinel)


def _split(url: str) -> SplitResult:
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # urlsplit's messages quote no userinfo
        raise RedisUrlError(url, f"not a URL ({exc})") from None
    return parts._replace(scheme=parts.scheme.lower())


def _check_server(url: str, parts: SplitResult) -> None:
    if "," in parts.netloc:
        raise RedisUrlError(url, "several hosts: only redis+sentinel:// URLs list several")
    if not parts.hostname:
        raise RedisUrlError(url, "no host")
    _port(url, lambda: parts.port)
    if parts.path.strip("/") and not parts.path.strip("/").isdigit():
        raise RedisUrlError(url, "the path must be a database number (/0)")


def _parse(url: str, text: str) -> dict[str, Any]:
    try:
        return dict(parse_url(text))
    except ValueError as exc:  # "Invalid value for 'socket_timeout' in connection URL."
        raise RedisUrlError(url, str(exc)) from None


def _service_and_db(url: str, path: str) -> tuple[str, int]:
    segments = [unquote(s) for s in path.removeprefix("/").split("/")]
    if not segments[0] or len(segments) > 2:
        raise RedisUrlError(url, "the path must be /service or /service/db")
    if len(segments) == 2 and not segments[1].isdigit():
        raise RedisUrlError(url, "the database after the service must be a number")
    return segments[0], int(segments[1]) if len(segments) == 2 else 0


def _credentials(parts: SplitResult) -> dict[str, str]:
    found = {"username": parts.username, "password": parts.password}
    return {key: unquote(value) for key, value in found.items() if value}


def _sentinel_hosts(url: str, netloc: str) -> tuple[tuple[str, int], ...]:
    hosts = netloc.rpartition("@")[2]
    if not hosts:
        raise RedisUrlError(url, "no Sentinel host")
    return tuple(_host_port(url, item) for item in hosts.split(","))


def _host_port(url: str, item: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` (the port of a Sentinel by default)."""
    parts = _split(f"redis://{item}")
    if not parts.hostname:
        raise RedisUrlError(url, f"no host in {item!r}")
    return parts.hostname, _port(url, lambda: parts.port) or SENTINEL_PORT


def _port(url: str, read: Callable[[], int | None]) -> int | None:
    try:
        port = read()
    except ValueError:  # not a number, or out of range
        raise RedisUrlError(url, "the port must be a number in 1..65535") from None
    if port == 0:
        raise RedisUrlError(url, "the port must be a number in 1..65535")
    return port
