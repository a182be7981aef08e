"""The deployment secret of ``kvgate up``, ``workers`` and ``gateway``: from ``$KVGATE_HASH_SECRET``
(never a flag: flags show up in process listings), made up for a local cluster, or absent only
where the operator said ``--insecure``.

The secret keys everything that tells the deployment's own processes from anyone else's
(:mod:`kvgate.proto.trust`): signed worker records, the gateways' call token, keyed chunk hashes.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
from dataclasses import dataclass

from kvgate.cli.cache_args import SECRET_ENV

log = logging.getLogger(__name__)
MIN_SECRET_BYTES = 16
_WITHOUT = (
    "without a deployment secret, anyone who can write to Redis can pose as a worker and receive "
    "users' prompts, anyone who can reach a worker's port can call it, and chunk hashes are predictable"
)


def add_insecure_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--insecure", action="store_true",
                        help=f"run without ${SECRET_ENV} (unsigned worker records, unauthenticated "
                             "worker calls): for throwaway test clusters only")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Secret:
    """The secret to run with (empty: none) and how it came about (``"environment"``,
    ``"generated"`` or ``"none"``)."""

    value: bytes
    source: str


def deployment_secret(env: str | None, *, local: bool, insecure: bool) -> Secret:
    """The secret of ``env`` (``$KVGATE_HASH_SECRET``'s value).

    Unset: a fresh random one when ``local`` (one machine: every process of the cluster gets it from
    this one), none when ``insecure`` (with a warning), else ValueError saying why and what to do. A
    set one shorter than :data:`MIN_SECRET_BYTES` is refused unless ``insecure``: records signed with
    it could be brute-forced offline.
    """
    if env:
        if len(env.encode()) < MIN_SECRET_BYTES and not insecure:
            raise ValueError(
                f"${SECRET_ENV} is {len(env.encode())} bytes; use at least {MIN_SECRET_BYTES} "
                "(e.g. openssl rand -hex 32), or pass --insecure"
            )
        return Secret(env.encode(), "environment")
    if insecure:
        log.warning("INSECURE: running without $%s (--insecure): %s", SECRET_ENV, _WITHOUT)
        return Secret(b"", "none")
    if local:
        return Secret(secrets.token_hex(32).encode(), "generated")
    raise ValueError(
        f"a multi-node deployment needs a secret: set ${SECRET_ENV} to the same value on every node "
        f"(e.g. openssl rand -hex 32), or pass --insecure to run without one ({_WITHOUT})"
    )


def secret_from(args: argparse.Namespace, *, local: bool) -> Secret:
    """:func:`deployment_secret` of the environment and ``args.insecure``."""
    return deployment_secret(os.environ.get(SECRET_ENV), local=local, insecure=args.insecure)
