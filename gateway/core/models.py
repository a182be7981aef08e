"""``ModelCatalog``: the model names clients may send, and which LoRA adapter each selects.

The served model answers to its name; each LoRA adapter a live worker advertises answers to
``MODEL:ADAPTER`` and, as vLLM's clients expect, to its bare id (unless that is the model's name).
The adapters are read from the worker directory on every call, so an adapter is servable exactly
while some live worker holds it.
"""

from __future__ import annotations

from collections.abc import Callable

from kvgate.gateway.errors import ErrorKind, GatewayError


class ModelCatalog:
    """``adapters``: the adapter ids live workers hold now (sorted; no I/O)."""

    def __init__(self, model_name: str, adapters: Callable[[], tuple[str, ...]]) -> None:
        self.model_name = model_name
        self._adapters = adapters

    def resolve(self, name: str) -> str:
        """The adapter id ``name`` selects ("" for the base model); NOT_FOUND naming what is served
        when no live worker serves it."""
        if name == self.model_name:
            return ""
        base, sep, adapter = name.rpartition(":")
        wanted = adapter if sep and base == self.model_name else name
        if wanted in self._adapters():
            return wanted
        served = ", ".join(f"`{n}`" for n in self.names())
        message = f"The model `{name}` does not exist. This server serves: {served}."
        raise GatewayError(message, ErrorKind.NOT_FOUND, param="model", code="model_not_found")

    def names(self) -> list[str]:
        """The model's name, then ``MODEL:ADAPTER`` for each adapter held now."""
        return [self.model_name, *(f"{self.model_name}:{a}" for a in self._adapters())]
