"""Adapters loaded on request: the folder is scanned once, each adapter loads at most once however many
threads ask, and what cannot be held is refused with the reason, holding nothing."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from kvgate.workers.model.lora import AdapterLibrary, AdapterSet, LoraAdapter


def _folder(root: Path, *names: str) -> Path:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "adapter_config.json").write_text(json.dumps({"r": 2}))
    (root / "not-an-adapter").mkdir()
    return root


class _Loader:
    def __init__(self, fail: str = "") -> None:
        self.calls: list[str] = []
        self.fail = fail
        self.gate = threading.Event()

    def __call__(self, folder: Path, name: str) -> LoraAdapter:
        self.calls.append(name)
        self.gate.wait(5)
        if name == self.fail:
            raise OSError(f"cannot read {folder}")
        return LoraAdapter(name, 2, {})


def test_the_folder_lists_what_can_load_and_a_request_loads_it_once(tmp_path: Path) -> None:
    loader = _Loader()
    library = AdapterLibrary(AdapterSet(), _folder(tmp_path, "sql", "support", "bad:name"), loader)
    assert library.loadable == ("sql", "support")  # no config: not an adapter; "bad:name": not an id
    threads = [threading.Thread(target=library.ensure, args=("sql",)) for _ in range(4)]
    for t in threads:
        t.start()
    loader.gate.set()
    for t in threads:
        t.join()
    assert loader.calls == ["sql"]
    assert library.held.names == ("sql",)
    assert library.loadable == ("support",)
    library.ensure("sql")
    assert loader.calls == ["sql"]


def test_what_cannot_be_held_is_refused_and_nothing_is_held(tmp_path: Path) -> None:
    loader = _Loader(fail="support")
    loader.gate.set()
    library = AdapterLibrary(AdapterSet(), _folder(tmp_path, "sql", "support", "x"), loader, max_loaded=1)
    with pytest.raises(ValueError, match=r"'nope' is not loaded on this worker \(loaded: none\)"):
        library.ensure("nope")
    with pytest.raises(ValueError, match="'support' could not be loaded: cannot read"):
        library.ensure("support")
    library.ensure("sql")
    with pytest.raises(ValueError, match="holds 1 LoRA adapters, its most: not 'x'"):
        library.ensure("x")
    assert library.held.names == ("sql",)


def test_adapters_held_at_start_are_not_loadable_and_no_folder_means_none(tmp_path: Path) -> None:
    held = AdapterSet([LoraAdapter("sql", 2, {})])
    assert AdapterLibrary(held, _folder(tmp_path, "sql", "b"), _Loader()).loadable == ("b",)
    assert AdapterLibrary(AdapterSet(), None, _Loader()).loadable == ()
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        AdapterLibrary(AdapterSet(), tmp_path / "missing", _Loader())
