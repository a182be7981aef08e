"""The gRPC server of the gateway: its service, ``grpc.health.v1`` and reflection."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from kvgate.common.grpc_options import SERVER_OPTIONS
from kvgate.gateway.grpc_api.servicer import GatewayServicer
from kvgate.proto import gateway_pb2, gateway_pb2_grpc


def build_grpc_server(
    servicer: GatewayServicer, address: str, max_message_bytes: int
) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server with the gateway service, grpc.health.v1 and reflection; not started.
    Returns the server and the bound port (``address`` may end in ``:0``). A request message over
    ``max_message_bytes`` (the HTTP front's body limit: one limit for both) is refused by gRPC
    itself, RESOURCE_EXHAUSTED, before it is parsed."""
    limit = ("grpc.max_receive_message_length", max_message_bytes)
    options = [o for o in SERVER_OPTIONS if o[0] != limit[0]] + [limit]
    server = grpc.aio.server(options=options)
    gateway_pb2_grpc.add_KVGatewayServicer_to_server(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (
        gateway_pb2.DESCRIPTOR.services_by_name["KVGateway"].full_name,
        reflection.SERVICE_NAME,
        health.SERVICE_NAME,
    )
    reflection.enable_server_reflection(names, server)
    port = server.add_insecure_port(address)
    return server, port
