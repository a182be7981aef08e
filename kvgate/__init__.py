"""kvgate: a prefix-cache routing gateway for LLM serving.

The repository's folders are the subpackages of ``kvgate`` (see ``pyproject.toml``):

- ``proto/``   -> ``kvgate.proto``   the gateway-worker contract (chunk hashing, gRPC, events); torch-free
- ``gateway/`` -> ``kvgate.gateway`` HTTP and gRPC fronts, routing policies; torch-free
- ``workers/`` -> ``kvgate.workers`` the inference engine and its Ray actor
- ``kernels/`` -> ``kvgate.kernels`` paged-attention kernels (torch reference, Triton)
- ``kvgate/``  -> ``kvgate``         settings, the global prefix index, the CLI
"""

__version__ = "0.1.0"
