"""gRPC channel and server options shared by gateway and workers, so keepalive is matched: a client
that pings more often than its server permits gets GOAWAY ("too_many_pings") and drops streams."""

from __future__ import annotations

KEEPALIVE_TIME_MS = 20_000  # client pings an idle connection every 20 s...
KEEPALIVE_TIMEOUT_MS = 10_000  # ...and drops it if the ping is not answered in 10 s
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a 1M-token prompt as packed uint32 is ~4-5 MB

CLIENT_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
)

SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    # Permit the clients' pings: anything slower than the client's interval is refused.
    # One server per port: two workers of a node must never share one (gRPC enables SO_REUSEPORT).
    ("grpc.so_reuseport", 0),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", KEEPALIVE_TIME_MS // 2),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
)
