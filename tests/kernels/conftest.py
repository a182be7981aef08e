"""Kernel-test setup. Without CUDA the Triton kernels run in Triton's interpreter on CPU tensors, so
``TRITON_INTERPRET=1`` is set here, before the test modules import triton. If another test imported triton
earlier in this process, the Triton tests run in a fresh interpreter instead (see ``triton_env``).

Triton tests skip when triton is missing or its interpreter cannot run here, and fail instead where
``KVGATE_REQUIRE_TRITON=1``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch

from tests.kernels import triton_env

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
IN_PROCESS = HAS_CUDA or triton_env.interprets_in_process()
HERE = Path(__file__).parent


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: hand over only the tests that will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if IN_PROCESS:
        return
    mine = [item for item in items if item.path.parent == HERE and "triton_backend" in item.fixturenames]
    triton_env.delegate_to_subprocess(mine, config.rootpath)


def _triton_unavailable(reason: str) -> None:
    if os.environ.get("KVGATE_REQUIRE_TRITON") == "1":
        pytest.fail(f"KVGATE_REQUIRE_TRITON=1 but the Triton kernels cannot run: {reason}")
    pytest.skip(f"Triton kernels cannot run here: {reason}")


@pytest.fixture(scope="session")
def triton_backend() -> ModuleType | None:
    """``kvgate.kernels.triton_ops.backend``, runnable on ``kernel_device``; skips (or fails) otherwise.
    None where the tests were handed to a fresh interpreter (their bodies do not run here)."""
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        _triton_unavailable(f"triton is not installed ({exc}); pip install 'kvgate[triton]'")
    if not IN_PROCESS:
        return None
    problem = None if HAS_CUDA else triton_env.interpreter_problem()
    if problem:
        _triton_unavailable(problem)
    return importlib.import_module("kvgate.kernels.triton_ops.backend")


@pytest.fixture(scope="session")
def kernel_device() -> torch.device:
    """Where the Triton tests run: CUDA when present (compiled), else the CPU (interpreted)."""
    return torch.device("cuda" if HAS_CUDA else "cpu")


@pytest.fixture
def make_triton(triton_backend: ModuleType | None) -> Callable[..., object]:
    """Build a ``TritonKernels`` with ``TritonConfig(**overrides)``."""

    def build(**overrides: int) -> object:
        config_module = importlib.import_module("kvgate.kernels.triton_ops.config")
        return triton_backend.TritonKernels(config_module.TritonConfig(**overrides))

    return build
