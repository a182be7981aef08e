"""``AdapterLibrary``: the adapters an engine holds, and those it may load when a request names them.

A worker started with a LoRA folder (``--lora-dir``) lists its subfolders that hold a PEFT adapter
(``adapter_config.json``) once, at start: those ids are *loadable*. The first request naming one loads
it (on the caller's thread, never the engine's step thread) and from then on it is *held* like the
adapters loaded at start. Held adapters stay loaded for the worker's life: their number is bounded by
``max_loaded`` (beyond it a request for another one is refused until the worker restarts).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from kvgate.proto.workers import check_adapter_id
from kvgate.workers.model.lora.adapter import LoraAdapter
from kvgate.workers.model.lora.adapter_set import AdapterSet
from kvgate.workers.model.lora.peft import CONFIG_FILE

log = logging.getLogger(__name__)
Loader = Callable[[Path, str], LoraAdapter]  # (PEFT folder, id) -> the adapter, ready on the device


class AdapterLibrary:
    """``held``: the adapters loaded already (the engine reads them while stepping); ``folder``: where
    loadable ones live (None: none); ``load``: reads one into the model's device and dtype."""

    def __init__(self, held: AdapterSet, folder: Path | None, load: Loader, max_loaded: int = 64) -> None:
        self.held = held
        self._load = load
        self._max = max_loaded
        self._lock = threading.Lock()
        self._paths = {} if folder is None else _scan(folder)  # held ones are skipped by ensure()

    @property
    def loadable(self) -> tuple[str, ...]:
        """Ids that are not held yet and can be loaded on request, sorted (fixed at start)."""
        return tuple(sorted(set(self._paths) - set(self.held.names)))

    def ensure(self, name: str) -> None:
        """Makes sure ``name`` is held: loads it when it is loadable and not held yet (once, however
        many threads ask). ValueError naming what is held when it is neither, when the worker holds
        ``max_loaded`` adapters already, or when loading fails (then nothing is held)."""
        if name in self.held:
            return
        with self._lock:
            if name in self.held:
                return
            if name not in self._paths:
                self.held.get(name)  # raises, naming the adapters held here
            if len(self.held) >= self._max:
                raise ValueError(f"this worker holds {len(self.held)} LoRA adapters, its most: not {name!r}")
            log.info("loading LoRA adapter %r from %s", name, self._paths[name])
            try:
                adapter = self._load(self._paths[name], name)
            except Exception as exc:  # a folder changed since the scan, or a broken file: the request fails
                raise ValueError(f"LoRA adapter {name!r} could not be loaded: {exc}") from exc
            self.held.add(adapter)


def _scan(folder: Path) -> dict[str, Path]:
    """Subfolders of ``folder`` holding a PEFT adapter, by name; names that are not valid adapter ids
    are skipped with a warning. FileNotFoundError when ``folder`` is not a directory."""
    if not folder.is_dir():
        raise FileNotFoundError(f"LoRA folder {folder} is not a directory")
    found: dict[str, Path] = {}
    for sub in sorted(folder.iterdir()):
        if not (sub / CONFIG_FILE).is_file():
            continue
        try:
            check_adapter_id(sub.name)
        except ValueError as exc:
            log.warning("skipping LoRA adapter folder %s: %s", sub, exc)
            continue
        found[sub.name] = sub
    return found
