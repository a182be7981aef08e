"""Which cache a request reads and fills: the caller's own namespace, and optionally a shared one for
its system prompt. Derived on the server from the authenticated caller; the client only opts in.

- Own namespace: the tenant's salt, with the client's ``cache_salt`` (if any) appended after a
  separator that tenant names cannot contain, so a client salt only splits the tenant's own cache.
- Salts are keyed: a namespace's salt is ``HMAC-SHA256(deployment secret, namespace)``, so whoever
  reaches a worker port directly, without the secret, cannot name any tenant's cache.
- Shared namespace (``x-kvgate-cache-namespace``, if the tenant may use it): the leading system
  messages, rounded down to whole chunks, hash under the namespace's salt; the chain then continues
  under the caller's own salt (:mod:`kvgate.proto.chain`), so the rest of the prompt stays private.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from kvgate.gateway.core.auth import NAMESPACE_HEADER
from kvgate.gateway.errors import ErrorKind, GatewayError, invalid
from kvgate.gateway.tenancy import Caller
from kvgate.proto.chain import ChainRoots
from kvgate.proto.layout import CacheLayout
from kvgate.proto.units import TokenCount

NAMESPACE_PARAM = NAMESPACE_HEADER


@dataclass(frozen=True, slots=True)
class CacheScope:
    """``private_salt`` for the whole prompt, except its first ``shared_tokens`` tokens (a multiple of
    the chunk size), which hash under ``shared_salt``; both under the LoRA adapter ``adapter_id`` (""
    for the base model), so requests of different adapters never share a cached block."""

    private_salt: str
    shared_salt: str = ""
    shared_tokens: TokenCount = 0
    adapter_id: str = ""

    def roots(self, cache: CacheLayout) -> ChainRoots:
        """The request's chain roots, by the layout's salt -> root rule."""
        return cache.roots(self.private_salt, self.shared_salt, self.shared_tokens, self.adapter_id)


def keyed(secret: bytes, namespace_salt: str) -> str:
    """The salt sent to workers for a namespace: empty stays empty (one anonymous tenant hashes as
    without tenants); anything else is HMAC'd with the deployment secret."""
    if not namespace_salt:
        return ""
    return "k1:" + hmac.new(secret, namespace_salt.encode(), hashlib.sha256).hexdigest()[:32]


def cache_scope(
    caller: Caller, client_salt: str, shared_prefix: int | None, cache: CacheLayout, adapter_id: str = ""
) -> CacheScope:
    """The scope of a request. ``shared_prefix``: tokens of its leading system messages (None: the
    request has no such structure, e.g. a raw completion); ``adapter_id``: its LoRA adapter ("": none).
    PERMISSION_DENIED for a namespace the tenant may not use; INVALID_REQUEST for a namespace on a
    request without a system prompt."""
    own = keyed(cache.secret, caller.tenant.cache_salt())
    private = f"{own}\x1f{client_salt}" if client_salt else own
    if caller.namespace is None:
        return CacheScope(private, adapter_id=adapter_id)
    try:
        shared = caller.cache_salt()
    except PermissionError as exc:
        raise GatewayError(str(exc), ErrorKind.PERMISSION_DENIED, param=NAMESPACE_PARAM,
                           code="namespace_forbidden") from exc  # fmt: skip
    if shared_prefix is None:
        message = "a shared cache namespace applies to the system prompt of a chat request"
        raise invalid(message, NAMESPACE_PARAM)
    return CacheScope(private, keyed(cache.secret, shared), cache.whole_chunks(shared_prefix), adapter_id)
