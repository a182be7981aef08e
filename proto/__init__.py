"""The gateway-worker contract, the ground floor: chunk hashing, the cache layout (sizes, TTL classes,
the reusable-tokens rule, salt -> root, KV geometry, fingerprint), typed ids and counts, KV events,
gRPC messages.

Both sides import this package; it imports nothing else of kvgate and never torch. Changing any byte
layout in here is a breaking change for every deployed gateway and worker: the golden vectors in
``tests/proto`` pin it.
"""
