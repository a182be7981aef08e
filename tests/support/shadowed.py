"""The repository's root folders are importable under their own names while tests and benchmarks run
from the root (``python -m pytest`` and ``python -m bench.x`` put the working directory first on
``sys.path``). One of them, ``kernels/`` (packaged as ``kvgate.kernels``), has the name of a PyPI
package that ``transformers`` imports (Hugging Face's hub kernels). ``prefer_installed`` imports the
installed package first, so that every later ``import kernels`` finds it in ``sys.modules`` instead of
this repository's folder."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHADOWED = ("kernels",)  # root folders whose names are also installed packages


def prefer_installed(names: tuple[str, ...] = SHADOWED) -> None:
    """Imports each installed package of ``names`` with the repository root off ``sys.path`` (restored
    after); a name with no installed package is left alone. Idempotent."""
    saved = list(sys.path)
    sys.path[:] = [entry for entry in saved if not _is_root(entry)]
    try:
        for name in names:
            loaded = sys.modules.get(name)
            if loaded is not None and not _from_root(loaded):
                continue
            sys.modules.pop(name, None)
            if importlib.util.find_spec(name) is not None:
                with contextlib.suppress(ImportError):
                    importlib.import_module(name)
    finally:
        sys.path[:] = saved


def _is_root(entry: str) -> bool:
    try:
        return Path(entry or ".").resolve() == ROOT
    except OSError:
        return False


def _from_root(module: object) -> bool:
    file = getattr(module, "__file__", None)
    return file is not None and Path(file).resolve().is_relative_to(ROOT)
