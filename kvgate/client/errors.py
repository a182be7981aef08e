"""The client's one error type, and which failures may be retried."""

from __future__ import annotations

import grpc


class KVGateError(Exception):
    """A call that failed: ``code`` is its gRPC status, ``details`` the gateway's message."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details

    @classmethod
    def of(cls, error: grpc.RpcError) -> KVGateError:
        return cls(error.code(), error.details() or "")  # type: ignore[attr-defined]


def retryable(error: grpc.RpcError, output_started: bool) -> bool:
    """Only ``UNAVAILABLE`` before any output: no answer was produced, so sending the request again
    cannot duplicate one (it does count against the tenant's rate limit again)."""
    return not output_started and error.code() is grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
