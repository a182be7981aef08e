"""kvgate: a prefix-cache routing gateway for LLM serving.

Every folder of the repository is imported as ``kvgate.<folder>``; each is one part on one floor,
and nothing imports a floor above its own (the import-linter contracts in ``pyproject.toml``):

- floor 3, applications: ``kvgate/`` -> ``kvgate.cli``, ``kvgate.cluster``, ``kvgate.sim``,
  ``kvgate.loadgen``, ``kvgate.audit`` (the CLI, the cluster launcher, the simulator, the load
  generator, the timing audit). Nothing but tests imports them.
- floor 2: ``gateway/`` -> ``kvgate.gateway`` (request core, HTTP and gRPC fronts, routing; torch-free)
  and ``workers/`` -> ``kvgate.workers`` (the engine, its gRPC service and Ray actor). Neither imports
  the other.
- floor 1, foundation: ``index/`` -> ``kvgate.index`` (the global prefix index and its event feed),
  ``common/`` -> ``kvgate.common`` (tokenizer and chat templates, clocks, gRPC options and TLS, the
  model registry), ``kernels/`` -> ``kvgate.kernels`` (paged-attention kernels).
- floor 0, the contract: ``proto/`` -> ``kvgate.proto`` (hashing, the cache layout, gRPC messages).

This folder is the import root: besides the applications it holds one relative symlink per lower
floor (``kvgate/gateway -> ../gateway``), so the tree is one ordinary package for Python and for
every tool. ``docs/ARCHITECTURE.md`` walks a request and a KV event through it.
"""

__version__ = "0.1.0"
