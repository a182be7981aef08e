"""The Redis index over TLS (``rediss://``) with AUTH, against a real redis-server started with a TLS
port and a password: it works with the right CA and password, and fails fast and clearly (as
IndexUnavailableError) with a wrong password, no password or an untrusted certificate."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvgate.common.clock import SystemClock
from kvgate.index import IndexSettings, IndexUnavailableError, RedisPrefixIndex, redis_client
from kvgate.proto.workers import WorkerInfo, WorkerLoad
from tests.support.certs import Certs, make_certs
from tests.support.redis_server import free_port, redis_server_binary

pytestmark = pytest.mark.redis
PASSWORD = "s3cret-pass"
SETTINGS = IndexSettings(timeout_s=2.0)  # a TLS handshake on a busy machine takes more than 25 ms


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("redis-certs"))


@pytest.fixture(scope="module")
def tls_redis(certs: Certs) -> Iterator[int]:
    binary = redis_server_binary()
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    args = [binary, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
            "--tls-cert-file", certs.cert, "--tls-key-file", certs.key, "--tls-ca-cert-file", certs.ca,
            "--tls-auth-clients", "no", "--requirepass", PASSWORD, "--save", "", "--appendonly", "no",
            "--dir", tempfile.mkdtemp(prefix="kvgate-redis-tls-")]  # fmt: skip
    proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_listening(port, proc)
        yield port
    finally:
        proc.kill()
        proc.wait()


def _wait_listening(port: int, proc: subprocess.Popen) -> None:
    for _ in range(100):
        if proc.poll() is not None:
            pytest.skip(f"this redis-server has no TLS support: {proc.stderr.read().decode()[:200]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError("redis-server did not listen")


def _url(port: int, ca: Path, password: str | None = PASSWORD) -> str:
    auth = f":{password}@" if password is not None else ""
    return f"rediss://{auth}127.0.0.1:{port}/0?ssl_ca_certs={ca}"


async def test_the_index_works_over_tls_with_auth(tls_redis: int, certs: Certs) -> None:
    index = RedisPrefixIndex(redis_client(_url(tls_redis, certs.ca), SETTINGS), SETTINGS, SystemClock())
    try:
        await index.start()
        await index.register(WorkerInfo("w-tls", 1, "127.0.0.1:1", "fp", "m"), WorkerLoad(gpu_blocks_total=8))
        assert [w.info.worker_id for w in await index.workers()] == ["w-tls"]
    finally:
        await index.close()


@pytest.mark.parametrize("problem", ["wrong password", "no password", "untrusted certificate"])
async def test_bad_credentials_fail_clearly(tls_redis: int, certs: Certs, problem: str) -> None:
    url = {
        "wrong password": _url(tls_redis, certs.ca, "nope"),
        "no password": _url(tls_redis, certs.ca, None),
        "untrusted certificate": _url(tls_redis, certs.other_ca),
    }[problem]
    index = RedisPrefixIndex(redis_client(url, SETTINGS), SETTINGS, SystemClock())
    try:
        with pytest.raises(IndexUnavailableError):
            await index.start()
    finally:
        await index.close()
