"""Packaging: every folder is importable as a ``kvgate`` subpackage, installed or editable."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _packages_on_disk() -> set[str]:
    found = set()
    for name, folder in SETUPTOOLS["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            if "__pycache__" not in relative:
                found.add(".".join((name, *relative)))
    # a mapped child folder (kvgate.gateway -> gateway/) is not also a folder under kvgate/
    return found


def test_every_package_folder_is_listed_in_pyproject() -> None:
    assert _packages_on_disk() == set(SETUPTOOLS["packages"])


def test_every_listed_package_imports() -> None:
    for name in SETUPTOOLS["packages"]:
        importlib.import_module(name)


def test_the_gateway_side_never_imports_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, kvgate.proto.hashing, kvgate.proto.convert, kvgate.index, kvgate.cli.main;"
        "import kvgate.gateway.routing.router, kvgate.gateway.upstream.dispatch;"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
