"""The gateway-worker contract: chunk hashing, config fingerprint, KV events, gRPC messages.

Both sides import this package and nothing here imports torch. Changing any byte layout in here is a
breaking change for every deployed gateway and worker: the golden vectors in ``tests/proto`` pin it.
"""
