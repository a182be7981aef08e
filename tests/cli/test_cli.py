"""The ``kvgate`` command, run as users run it: a subprocess of the installed console script."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, RedisPrefixIndex, redis_client
from kvgate.proto.hashing import chunk_hashes
from kvgate.proto.layout import CacheLayout
from tests.index.conftest import drop_namespace
from tests.index.helpers import LOAD, A, info


def kvgate(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kvgate", *args], input=stdin, capture_output=True, text=True, timeout=60, env=env)


def test_hash_prints_the_library_hashes() -> None:
    ids = list(range(300))
    out = kvgate("hash", "--cache-salt", "t1", stdin=",".join(map(str, ids)))
    config = CacheLayout("HuggingFaceTB/SmolLM2-135M-Instruct")
    expected = [h.hex() for h in chunk_hashes(ids, config.root(cache_salt="t1").digest(), config.chunk_size)]
    assert out.returncode == 0
    assert [line.split("\t") for line in out.stdout.splitlines()] == [
        [str(i), h] for i, h in enumerate(expected)
    ]


def test_fingerprint_depends_on_the_secret_from_the_environment() -> None:
    import os

    plain = kvgate("fingerprint").stdout.strip()
    salted = kvgate("fingerprint", env=os.environ | {"KVGATE_HASH_SECRET": "s"}).stdout.strip()
    assert plain == CacheLayout("HuggingFaceTB/SmolLM2-135M-Instruct").fingerprint()
    assert salted == CacheLayout("HuggingFaceTB/SmolLM2-135M-Instruct", b"s").fingerprint()


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (("hash",), "1 two 3", "token ids must be integers"),
        (("hash",), "-4", "token ids must lie in"),
        (("fingerprint", "--chunk-size", "100"), "", "multiple of block_size"),
    ],
)
def test_bad_input_is_a_clear_error_not_a_traceback(args: tuple[str, ...], stdin: str, message: str) -> None:
    out = kvgate(*args, stdin=stdin)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.redis
def test_index_lists_live_workers(redis_url: str) -> None:
    settings = IndexSettings(namespace="kvgate-cli-test", timeout_s=2)

    async def register() -> None:
        index = RedisPrefixIndex(redis_client(redis_url, settings), settings, SystemClock())
        await index.register(info(A), LOAD)
        await index.close()

    asyncio.run(register())
    try:
        out = kvgate("index", "--redis-url", redis_url, "--namespace", "kvgate-cli-test")
    finally:
        asyncio.run(drop_namespace(redis_url, "kvgate-cli-test"))
    assert out.returncode == 0
    assert A in out.stdout
    assert "60%" in out.stdout  # LOAD: 40 of 100 GPU blocks free
    assert "1 live worker(s)" in out.stdout


def test_index_reports_an_unreachable_redis() -> None:
    out = kvgate("index", "--redis-url", "redis://127.0.0.1:1/0", "--timeout", "0.2")
    assert out.returncode == 1
    assert "unavailable" in out.stdout
