"""The foundation the gateway and the workers both stand on: the tokenizer and chat templates
(:mod:`kvgate.common.tokenizer`), clocks, gRPC channel options and TLS, and the model registry.

Imports nothing of kvgate but the contract (:mod:`kvgate.proto`); imported by the index, the gateway,
the workers and the applications.
"""
