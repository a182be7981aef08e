"""``kvgate plan``: how many KV tokens a worker holds, and how many workers a workload needs.

- :mod:`.params`: the parameter count of a model, from its config (weights' memory).
- :mod:`.memory`: one worker's GPU and CPU tiers in blocks and tokens, for a KV dtype
  (:mod:`kvgate.proto.kv_dtype`: bytes per element and the int8/fp8 scales).
- :mod:`.model_source`: the model's config from ``default``, a ``.gguf`` file or a ``config.json``.
- :mod:`.search`: the simulator (:mod:`kvgate.sim`) over worker counts x KV dtypes at fixed memory, and
  the smallest configuration meeting a target.
- :mod:`.report`, :mod:`.plot`: the text, JSON and PNG views.
"""
