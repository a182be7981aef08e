"""TLS for the gateway-worker gRPC link (optional; plaintext when not configured), and how channels
to workers are opened (with TLS when configured, and with the deployment's call token).

One set of files serves both ends, as a cluster usually has: ``cert`` / ``key`` are the worker's server
certificate and, on the gateway, its client certificate; ``ca`` verifies the other end. With all
three on both ends the link is mutual TLS (workers refuse clients without a certificate from ``ca``).
Workers register IP addresses; either put the nodes' IPs in the certificate's subject alternative
names or set ``server_name`` to a name the certificate holds (``grpc.ssl_target_name_override``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from kvgate.common.grpc_auth import token_interceptors


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """PEM files; every given path must exist (checked at construction, so a typo fails at start)."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("TLS needs both a certificate and its key (or neither)")
        if self.ca is None and self.cert is None:
            raise ValueError("TLS needs a CA certificate, a certificate and key, or both")
        for name in ("ca", "cert", "key"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"TLS {name} file {path} does not exist")

    def server_credentials(self) -> grpc.ServerCredentials:
        """The worker's credentials: its certificate; client certificates required when ``ca`` is set."""
        if self.cert is None or self.key is None:
            raise ValueError("a TLS server needs a certificate and key")
        pair = [(_read(self.key), _read(self.cert))]
        ca = _read(self.ca) if self.ca is not None else None
        return grpc.ssl_server_credentials(pair, root_certificates=ca, require_client_auth=ca is not None)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """The gateway's credentials: verify workers against ``ca`` (else the system roots), and present
        ``cert`` when given (mutual TLS)."""
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca) if self.ca is not None else None,
            private_key=_read(self.key) if self.key is not None else None,
            certificate_chain=_read(self.cert) if self.cert is not None else None,
        )

    def channel_options(self) -> tuple[tuple[str, str], ...]:
        return (("grpc.ssl_target_name_override", self.server_name),) if self.server_name else ()


@dataclass(frozen=True, slots=True)
class ChannelSecurity:
    """What every channel to a worker is opened with, read from the files once (at start, never on
    the event loop's request path): TLS credentials (None: plaintext), the options they add, and the
    interceptors that present the deployment's call token (:mod:`kvgate.common.grpc_auth`)."""

    credentials: grpc.ChannelCredentials | None = None
    options: tuple[tuple[str, str], ...] = ()
    interceptors: tuple[grpc.aio.ClientInterceptor, ...] = ()

    @classmethod
    def of(cls, tls: TlsFiles | None, secret: bytes = b"") -> ChannelSecurity:
        """TLS of ``tls`` (None: plaintext); the call token of ``secret`` (empty: none)."""
        interceptors = tuple(token_interceptors(secret))
        if tls is None:
            return cls(interceptors=interceptors)
        return cls(tls.channel_credentials(), tls.channel_options(), interceptors)

    def open(self, address: str, options: tuple[tuple[str, int], ...]) -> grpc.aio.Channel:
        """A channel to ``address``: TLS when configured, else plaintext."""
        intercept = list(self.interceptors) or None
        if self.credentials is None:
            return grpc.aio.insecure_channel(address, options=options, interceptors=intercept)
        return grpc.aio.secure_channel(
            address, self.credentials, options=options + self.options, interceptors=intercept
        )


def _read(path: Path) -> bytes:
    return Path(path).read_bytes()
