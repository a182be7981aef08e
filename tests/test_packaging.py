"""Packaging: every folder is importable as a ``kvgate`` subpackage, from a bare checkout, installed or
editable, and the import contracts in ``pyproject.toml`` hold."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FIND = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
# The card's folders and the foundation's, each a lower floor linked into the import root.
FLOORS = ("proto", "kernels", "common", "index", "gateway", "workers")


def _package_folders() -> set[str]:
    """Every folder holding an ``__init__.py``, by its import name (``gateway/api`` ->
    ``kvgate.gateway.http_api``), found from the real folders (``rglob`` does not follow the links)."""
    found = set()
    for folder in ("kvgate", *FLOORS):
        prefix = () if folder == "kvgate" else ("kvgate",)
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            if "__pycache__" not in parts:
                found.add(".".join((*prefix, *parts)))
    return found


def test_each_floor_is_a_relative_symlink_in_the_import_root() -> None:
    for floor in FLOORS:
        link = ROOT / "kvgate" / floor
        assert link.is_symlink(), f"kvgate/{floor} must link to ../{floor}"
        assert os.readlink(link) == f"../{floor}"


def test_setuptools_finds_every_package_folder() -> None:
    found = set(find_packages(str(ROOT / FIND["where"][0]), include=FIND["include"]))
    assert found == _package_folders()


def test_every_package_imports() -> None:
    for name in sorted(_package_folders()):
        importlib.import_module(name)


def test_a_bare_checkout_imports(tmp_path: Path) -> None:
    """No install: the checkout's root on ``sys.path`` is enough (the symlinks do the mapping)."""
    code = "import kvgate.gateway.routing, kvgate.proto.hashing, kvgate.index; print(kvgate.proto.__file__)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                         cwd=tmp_path)  # fmt: skip
    assert out.stdout.strip() == str(ROOT / "kvgate" / "proto" / "__init__.py")


def test_the_gateway_side_never_imports_torch() -> None:
    """At run time, beside the import contract that checks it statically."""
    code = (
        "import sys, kvgate.proto.hashing, kvgate.proto.convert, kvgate.index, kvgate.cli.main;"
        "import kvgate.gateway.routing.router, kvgate.gateway.upstream.dispatch, kvgate.gateway.compose;"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter is not installed")
def test_a_gateway_module_importing_torch_breaks_a_contract(tmp_path: Path) -> None:
    """The contract is live: a copy of the tree with ``import torch`` in one gateway module fails."""
    copy = tmp_path / "tree"
    for name in ("kvgate", *FLOORS):
        shutil.copytree(ROOT / name, copy / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "static"))  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    cost = copy / "gateway" / "routing" / "cost.py"
    cost.write_text(cost.read_text() + "\nimport torch  # noqa\n")
    run = subprocess.run(["lint-imports", "--no-cache"], cwd=copy, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(copy)})  # fmt: skip
    assert run.returncode != 0
    assert "kvgate.gateway.routing.cost -> torch" in run.stdout
