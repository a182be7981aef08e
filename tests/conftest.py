"""Session-wide fixtures. Redis-backed tests run against a real redis-server: the one named by
KVGATE_TEST_REDIS_URL, else one started here. Without one they skip locally, but fail where
KVGATE_REQUIRE_REDIS=1 or CI is set, so CI can never pass by skipping them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.support.shadowed import prefer_installed

prefer_installed()  # before anything imports transformers, which imports PyPI's ``kernels``

from tests.support.redis_cluster import LocalRedisCluster  # noqa: E402
from tests.support.redis_sentinel import LocalSentinel  # noqa: E402
from tests.support.redis_server import RedisServer, redis_server_binary, wait_for_redis  # noqa: E402

# Fixtures shared by every folder that needs them (not copied per folder): the default model and its
# transformers twin (``tests.support.smollm2``), ``live`` (a gateway over scripted workers) and
# ``tiny_chat_model`` / ``start_worker`` (real workers on a tiny model).
pytest_plugins = ["tests.support.smollm2", "tests.support.live_gateway", "tests.support.real_workers"]


def _redis_required() -> bool:
    return os.environ.get("KVGATE_REQUIRE_REDIS") == "1" or bool(os.environ.get("CI"))


def _no_redis(reason: str) -> None:
    if _redis_required():
        pytest.fail(f"Redis is required here but unavailable: {reason}")
    pytest.skip(f"no Redis: {reason}")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a live Redis for the whole session."""
    url = os.environ.get("KVGATE_TEST_REDIS_URL")
    if url:
        try:
            wait_for_redis(url, 5.0)
        except RuntimeError as exc:
            _no_redis(str(exc))
        yield url
        return
    if redis_server_binary() is None:
        _no_redis("KVGATE_TEST_REDIS_URL is unset and redis-server is not installed")
    with RedisServer() as server:
        yield server.url


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own, which it may pause, stop and restart."""
    if redis_server_binary() is None:
        _no_redis("redis-server is not installed")
    with RedisServer() as server:
        yield server


def _need_redis_server(*tools: str) -> None:
    if redis_server_binary() is None:
        _no_redis("redis-server is not installed")
    for tool in tools:
        if shutil.which(tool) is None:
            _no_redis(f"{tool} is not installed")


@pytest.fixture(scope="session")
def redis_cluster_url() -> Iterator[str]:
    """One node's URL of a real 3-master Redis Cluster shared by the session (database 0 only).
    Tests share it: they use keys of their own and never stop a node (see ``private_redis_cluster``)."""
    _need_redis_server("redis-cli")
    with LocalRedisCluster() as cluster:
        yield cluster.url


@pytest.fixture
def private_redis_cluster() -> Iterator[LocalRedisCluster]:
    """A 3-master Redis Cluster of the test's own, whose nodes it may stop and restart."""
    _need_redis_server("redis-cli")
    with LocalRedisCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def redis_sentinel_url() -> Iterator[str]:
    """``redis+sentinel://127.0.0.1:PORT/kvgate/0``: a Sentinel watching a primary and a replica,
    shared by the session; it never fails over by itself (see ``private_sentinel`` for that)."""
    _need_redis_server()
    with LocalSentinel() as sentinel:
        yield sentinel.sentinel_url


@pytest.fixture
def private_sentinel() -> Iterator[LocalSentinel]:
    """A Sentinel deployment of the test's own that fails over one second after its primary dies
    (``kill_primary()``)."""
    _need_redis_server()
    with LocalSentinel(down_after_ms=1000) as sentinel:
        yield sentinel
