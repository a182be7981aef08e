"""The gateway's gRPC front (``kvgate.v1.KVGateway``): a thin translation over the request core."""
