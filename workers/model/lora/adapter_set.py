"""``AdapterSet``: the LoRA adapters one engine holds, by id."""

from __future__ import annotations

from collections.abc import Iterable

from kvgate.workers.model.lora.adapter import LoraAdapter


class AdapterSet:
    """Adapters by name, on the model's device and in its dtype. Grows only (:meth:`add`); reading it
    while another thread adds is safe (one dict assignment per add)."""

    def __init__(self, adapters: Iterable[LoraAdapter] = ()) -> None:
        self._by_name: dict[str, LoraAdapter] = {}
        for adapter in adapters:
            if not adapter.name:
                raise ValueError("a LoRA adapter needs a non-empty id")
            self.add(adapter)

    def add(self, adapter: LoraAdapter) -> None:
        """Holds ``adapter`` from now on; ValueError when its id is held already."""
        if adapter.name in self._by_name:
            raise ValueError(f"LoRA adapter id {adapter.name!r} is given twice")
        self._by_name[adapter.name] = adapter

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def names(self) -> tuple[str, ...]:
        """The ids, sorted."""
        return tuple(sorted(self._by_name))

    def get(self, name: str) -> LoraAdapter:
        """The adapter ``name``; ValueError naming the loaded ones when it is not held here."""
        adapter = self._by_name.get(name)
        if adapter is None:
            held = ", ".join(self.names) or "none"
            raise ValueError(f"LoRA adapter {name!r} is not loaded on this worker (loaded: {held})")
        return adapter

    def __len__(self) -> int:
        return len(self._by_name)
