"""The operators' endpoints behind an admin key (optional): ``/metrics``, ``/dashboard``, ``/docs``,
``/redoc`` and ``/openapi.json``. ``/health`` stays open for load balancers and orchestrators.

Admin keys are configured by their SHA-256 digest, like tenants' keys (``$KVGATE_ADMIN_KEYS``:
``sha256:<hex>[,sha256:<hex>...]``). A request presents one as ``Authorization: Bearer <key>`` (a
Prometheus scrape's ``authorization`` setting, ``kvgate top``) or as the password of HTTP Basic
authentication, any user name, which browsers prompt for and then send with every request of the
dashboard page.
"""

from __future__ import annotations

import base64
import binascii

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from kvgate.gateway.errors import ErrorKind, GatewayError
from kvgate.gateway.http_api.errors import error_response
from kvgate.gateway.tenancy import KeyRing, Tenant

ADMIN_ENV = "KVGATE_ADMIN_KEYS"
ADMIN_PATHS = ("/metrics", "/dashboard", "/docs", "/redoc", "/openapi.json")
_ADMIN = Tenant("admin")
_NEEDS_KEY = "this endpoint needs an admin key"


def admin_ring(value: str | None) -> KeyRing | None:
    """The admin keys of ``$KVGATE_ADMIN_KEYS`` (comma-separated digests); None when unset or empty."""
    digests = [part.strip() for part in (value or "").split(",") if part.strip()]
    return KeyRing([(digest, _ADMIN) for digest in digests]) if digests else None


def presented(headers: Headers) -> str | None:
    """The key of ``Authorization: Bearer <key>`` or the password of ``Authorization: Basic``."""
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return credentials.strip() or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


class AdminOnly:
    """ASGI middleware: with ``keys``, the admin paths answer only requests with one of them (else a
    401 that invites HTTP Basic authentication); without, it lets everything through."""

    def __init__(self, app: ASGIApp, keys: KeyRing | None) -> None:
        self._app = app
        self._keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._keys is None or scope["type"] != "http" or not _is_admin(scope.get("path", "")):
            await self._app(scope, receive, send)
            return
        if self._keys.authenticate(presented(Headers(scope=scope))) is not None:
            await self._app(scope, receive, send)
            return
        response = error_response(
            GatewayError(_NEEDS_KEY, ErrorKind.UNAUTHENTICATED, code="admin_key_required")
        )
        response.headers["www-authenticate"] = 'Basic realm="kvgate admin", charset="UTF-8"'
        await response(scope, receive, send)


def _is_admin(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in ADMIN_PATHS)
