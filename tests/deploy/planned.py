"""The cluster layer's names and defaults that deploy/ is written against, in one place.

Commands listed in ``PLANNED_FLAGS`` that do not exist yet in ``kvgate.cli.main.COMMANDS`` are checked
against these flag lists; as soon as one exists, the tests check the deploy files against its real parser
instead (so a flag that the implementation dropped or renamed fails here). Update this file, the deploy
files and deploy/README.md together.
"""

from __future__ import annotations

# subcommand -> the flags deploy/ uses or documents
PLANNED_FLAGS: dict[str, frozenset[str]] = {
    "up": frozenset(
        {"--workers", "--port", "--grpc-port", "--redis-url", "--ray-address", "--model", "--host"}
    ),
    "workers": frozenset({"--ray-address", "--workers", "--redis-url"}),
    # --host: containers need the gateway on all interfaces
    "gateway": frozenset({"--redis-url", "--port", "--grpc-port", "--host"}),
}

HTTP_PORT = 8000  # gateway: OpenAI / Anthropic API, /health, /metrics
GRPC_PORT = 50051  # gateway: kvgate.v1.KVGateway
WORKER_GRPC_BASE = 50100  # worker i of a node: gRPC on the i-th free port from 50100 (kvgate workers)
WORKER_METRICS_BASE = 9400  # worker i of a node: /metrics on 9400 + i
WORKER_PORTS_PER_NODE = 8  # ports the images expose per range (one worker per GPU, up to 8)
RAY_GCS_PORT = 6379
RAY_DASHBOARD_PORT = 8265
RAY_CLIENT_PORT = 10001
RAY_METRICS_PORT = 8080
REDIS_PORT = 6379
REDIS_PORT_BESIDE_RAY_HEAD = 6380  # Redis on the host of the Ray head, whose GCS has 6379
METRICS_PATH = "/metrics"
HEALTH_PATH = "/health"
