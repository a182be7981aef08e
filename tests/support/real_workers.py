"""Shared fixtures ``tiny_chat_model`` (the tiny chat model on disk, saved once per session) and
``start_worker`` (real :class:`WorkerServer` s on loopback, each stopped at the end of its test).
Registered for every test by ``tests/conftest.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kvgate.index.base import PrefixIndex
from kvgate.workers.service import WorkerServer
from tests.common.tokenizer.default_model import transformers_module
from tests.workers.service.helpers import worker_config
from tests.workers.service.tiny_model import save_tiny_chat_model

StartWorker = Callable[..., Awaitable[WorkerServer]]


@pytest.fixture(scope="session")
def tiny_chat_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    transformers_module()  # skips (or fails in CI) without transformers, which saves the weights
    return save_tiny_chat_model(tmp_path_factory.mktemp("tiny-chat"))


@pytest.fixture
async def start_worker(tiny_chat_model: Path) -> AsyncIterator[StartWorker]:
    """``await start_worker(index=None, **config)`` -> a started worker (see ``worker_config``)."""
    servers: list[WorkerServer] = []

    async def start(index: PrefixIndex | None = None, **config: Any) -> WorkerServer:
        server = WorkerServer(index)
        servers.append(server)
        await server.start(worker_config(tiny_chat_model, **config))
        return server

    yield start
    for server in reversed(servers):
        await server.stop()
