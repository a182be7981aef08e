"""``open_redis`` against real deployments: one server, a 3-master Redis Cluster reached through any
one node, and a Sentinel-watched primary that fails over. Bad URLs fail before connecting, and no
message ever shows the password."""

from __future__ import annotations

import asyncio
import socket
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis, RedisCluster

from kvgate.index.connect import SentinelPrimary, close_redis, open_redis
from kvgate.index.redis_url import RedisUrlError
from kvgate.index.types import IndexUnavailableError
from tests.support.certs import make_certs
from tests.support.redis_cluster import LocalRedisCluster
from tests.support.redis_sentinel import LocalSentinel
from tests.support.redis_server import RedisServer, free_port, redis_server_binary

pytestmark = pytest.mark.redis
TIMEOUT_S = 2.0  # generous: a busy 2-core machine
SECRET = "s3cret-pw"


async def test_a_plain_server_gives_a_plain_client(redis_url: str) -> None:
    client = await open_redis(redis_url, timeout_s=TIMEOUT_S)
    try:
        assert type(client) is Redis
        key = f"kvgate-test-{uuid.uuid4().hex}"
        assert await client.set(key, "v", px=60_000)
        assert await client.get(key) == "v"  # string replies
    finally:
        await client.aclose()


async def test_any_cluster_node_gives_a_client_of_the_whole_cluster(redis_cluster_url: str) -> None:
    """From one node's URL the client finds all three masters; from each master's URL the same."""
    first = await open_redis(redis_cluster_url, timeout_s=TIMEOUT_S)
    try:
        assert isinstance(first, RedisCluster)
        masters = sorted(node.port for node in first.get_primaries())
    finally:
        await first.aclose()
    assert len(masters) == 3
    for port in masters:
        client = await open_redis(f"redis://127.0.0.1:{port}/0", timeout_s=TIMEOUT_S)
        try:
            assert isinstance(client, RedisCluster)
            assert sorted(node.port for node in client.get_primaries()) == masters
        finally:
            await client.aclose()


async def test_keys_land_on_the_master_that_owns_their_slot(redis_cluster_url: str) -> None:
    """One key per master: SET/GET through the cluster client, then each key read straight from the
    master whose slot range (CLUSTER NODES) holds its CLUSTER KEYSLOT."""
    client = await open_redis(redis_cluster_url, timeout_s=TIMEOUT_S)
    assert isinstance(client, RedisCluster)
    try:
        owners = await _one_key_per_master(client)
        assert len(owners) == 3
        for key in owners.values():
            assert await client.set(key, f"value of {key}", px=60_000)
            assert await client.get(key) == f"value of {key}"
        for port, key in owners.items():
            await _assert_stored_on(port, key)
    finally:
        await client.aclose()


async def _one_key_per_master(client: RedisCluster) -> dict[int, str]:
    """Keys ``kvgate-test-<id>-<n>`` until every master owns one (by the server's CLUSTER KEYSLOT)."""
    ranges = _slot_ranges(await client.cluster_nodes())
    owners: dict[int, str] = {}
    run = uuid.uuid4().hex[:8]
    for n in range(200):
        key = f"kvgate-test-{run}-{n}"
        slot = await client.cluster_keyslot(key)
        port = next(port for port, spans in ranges.items() if any(lo <= slot <= hi for lo, hi in spans))
        owners.setdefault(port, key)
    return owners


def _slot_ranges(nodes: dict[str, dict]) -> dict[int, list[tuple[int, int]]]:
    """Master port -> its slot ranges, from redis-py's parse of CLUSTER NODES."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    for address, node in nodes.items():
        if "master" in node["flags"]:
            spans = ranges.setdefault(int(address.split("@")[0].rsplit(":", 1)[1]), [])
            spans.extend((int(lo), int(hi)) for lo, hi in node["slots"])
    return ranges


async def _assert_stored_on(port: int, key: str) -> None:
    """The master on ``port`` answers GET ``key`` itself (another would answer MOVED)."""
    direct = Redis(port=port, decode_responses=True, socket_timeout=TIMEOUT_S)
    try:
        assert await direct.get(key) == f"value of {key}"
    finally:
        await direct.aclose()


async def test_a_restarted_cluster_node_is_reached_again(private_redis_cluster: LocalRedisCluster) -> None:
    """A master restarts empty on its port: the client's next call to it may fail (no retries),
    then the client reaches it again, without reopening."""
    client = await open_redis(private_redis_cluster.url, timeout_s=TIMEOUT_S)
    assert isinstance(client, RedisCluster)
    try:
        victim = private_redis_cluster.nodes[1].port
        key = (await _one_key_per_master(client))[victim]
        assert await client.set(key, "before")
        private_redis_cluster.stop_node(1)
        await asyncio.to_thread(private_redis_cluster.restart_node, 1)
        assert await _eventually(lambda: client.get(key), None, within_s=10.0)  # back, and empty
        assert await client.set(key, "after")
    finally:
        await client.aclose()


async def test_a_cluster_has_only_database_0(redis_cluster_url: str) -> None:
    url = redis_cluster_url.rsplit("/", 1)[0] + "/3"
    with pytest.raises(RedisUrlError, match="only database 0"):
        await open_redis(url, timeout_s=TIMEOUT_S)


async def test_a_sentinel_url_gives_the_primary(redis_sentinel_url: str) -> None:
    client = await open_redis(redis_sentinel_url, timeout_s=TIMEOUT_S)
    try:
        assert isinstance(client, SentinelPrimary)
        assert (await client.info("replication"))["role"] == "master"
        key = f"kvgate-test-{uuid.uuid4().hex}"
        assert await client.set(key, "v", px=60_000)
        assert await client.get(key) == "v"
    finally:
        await client.aclose()


async def test_the_sentinel_client_follows_a_failover(private_sentinel: LocalSentinel) -> None:
    """The primary dies; once the Sentinel has promoted the replica, the same client reaches the
    new primary within a few seconds (calls in between fail), and finds the data replicated to it."""
    client = await open_redis(private_sentinel.sentinel_url, timeout_s=TIMEOUT_S)
    try:
        old = private_sentinel.primary_port()
        assert await _server_port(client) == old
        await client.set("before", "failover")
        assert await client.wait(1, 2000) == 1  # the replica has it
        new = await asyncio.to_thread(private_sentinel.kill_primary)
        assert new != old
        assert await _eventually(lambda: _server_port(client), new, within_s=10.0)
        assert await client.get("before") == "failover"
        assert await client.set("after", "failover")
    finally:
        await client.aclose()


async def _server_port(client: Redis) -> int:
    return int((await client.info("server"))["tcp_port"])


async def _eventually(call: Callable[[], Awaitable[object]], expected: object, within_s: float) -> bool:
    """True once ``await call()`` returns ``expected`` (errors meanwhile are retried); AssertionError
    with the last outcome after ``within_s``."""
    deadline = time.monotonic() + within_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            if (last := await call()) == expected:
                return True
        except Exception as exc:  # the dead primary's connections fail until the client reconnects
            last = exc
        await asyncio.sleep(0.05)
    raise AssertionError(f"not {expected!r} within {within_s}s: last {last!r}")


@pytest.mark.parametrize(
    "url",
    [
        f"http://:{SECRET}@127.0.0.1:6379/0",
        f"redis://:{SECRET}@127.0.0.1:notaport/0",
        f"redis://:{SECRET}@127.0.0.1:6379/zero",
        f"redis://:{SECRET}@/0",
        f"redis://:{SECRET}@h1:6379,h2:6379/0",
        f"redis://:{SECRET}@127.0.0.1:6379/0?socket_timeout=soon",
        f"redis://:{SECRET}@127.0.0.1:6379/0?no_such_option=1",
        f"redis://user:{SECRET}@[::1/0",
        f"unix://:{SECRET}@",
        f"redis+sentinel://:{SECRET}@127.0.0.1:26379",
        f"redis+sentinel://:{SECRET}@127.0.0.1:26379/service/db",
        f"redis+sentinel://:{SECRET}@/service",
        f"redis+sentinel://:{SECRET}@s1,,s2/service",
        f"redis+sentinel://:{SECRET}@s1:99999/service",
        f"redis+sentinel://s1/service?sentinel_password={SECRET}&db=x",
    ],
)
async def test_malformed_urls_raise_url_errors_with_the_password_masked(url: str) -> None:
    with pytest.raises(RedisUrlError) as caught:
        await open_redis(url, timeout_s=TIMEOUT_S)
    assert isinstance(caught.value, ValueError)
    _assert_masked(caught.value)


@pytest.mark.parametrize("scheme", ["redis", "redis+sentinel"])
async def test_an_unreachable_server_fails_promptly_naming_the_url(scheme: str) -> None:
    url = f"{scheme}://user:{SECRET}@127.0.0.1:{free_port()}/" + ("kvgate" if "sentinel" in scheme else "0")
    started = time.monotonic()
    with pytest.raises(IndexUnavailableError) as caught:
        await open_redis(url, timeout_s=TIMEOUT_S)
    assert time.monotonic() - started < 2 * TIMEOUT_S
    assert f"{scheme}://user:***@127.0.0.1:" in str(caught.value)
    _assert_masked(caught.value)


@pytest.mark.parametrize("scheme", ["redis", "redis+sentinel"])
async def test_a_server_that_never_answers_fails_within_the_timeout(scheme: str) -> None:
    """A port that accepts connections (the kernel's backlog) but never replies: no hang."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"{scheme}://127.0.0.1:{silent.getsockname()[1]}/" + ("kvgate" if "sentinel" in scheme else "0")
        started = time.monotonic()
        with pytest.raises(IndexUnavailableError) as caught:
            await asyncio.wait_for(open_redis(url, timeout_s=0.3), 5.0)  # a hang fails, not blocks
        assert url in str(caught.value)
        assert time.monotonic() - started < 3.0


@pytest.fixture
def password_redis_url(private_redis: RedisServer) -> str:
    """``redis://:PASSWORD@...`` of a server of the test's own that requires that password."""
    with redis.Redis(port=private_redis.port) as direct:
        direct.config_set("requirepass", SECRET)
    return f"redis://:{SECRET}@127.0.0.1:{private_redis.port}/0"


async def test_a_wrong_password_fails_at_open_not_at_first_use(password_redis_url: str) -> None:
    with pytest.raises(IndexUnavailableError, match="invalid username-password pair") as caught:
        await open_redis(password_redis_url.replace(SECRET, "wrong"), timeout_s=TIMEOUT_S)
    assert "redis://:***@127.0.0.1:" in str(caught.value)
    client = await open_redis(password_redis_url, timeout_s=TIMEOUT_S)
    try:
        assert await client.ping()
    finally:
        await client.aclose()


async def test_a_database_other_than_0_on_a_plain_server(redis_url: str) -> None:
    client = await open_redis(redis_url.rsplit("/", 1)[0] + "/5", timeout_s=TIMEOUT_S)
    try:
        assert (await client.client_info())["db"] == 5
    finally:
        await client.aclose()
    with pytest.raises(IndexUnavailableError, match="DB index is out of range"):
        await open_redis(redis_url.rsplit("/", 1)[0] + "/999", timeout_s=TIMEOUT_S)


async def test_tls_is_checked_at_open(tmp_path: Path) -> None:
    """``rediss://`` opens a TLS client (trusted CA: works; another CA: IndexUnavailableError)."""
    if redis_server_binary() is None:
        pytest.skip("redis-server is not installed")
    certs = make_certs(tmp_path)
    tls_port = free_port()
    args = ["--tls-port", str(tls_port), "--tls-cert-file", str(certs.cert), "--tls-key-file", str(certs.key),
            "--tls-ca-cert-file", str(certs.ca), "--tls-auth-clients", "no"]  # fmt: skip
    url = f"rediss://127.0.0.1:{tls_port}/0?ssl_ca_certs="
    with RedisServer(args=args):
        client = await open_redis(f"{url}{certs.ca}", timeout_s=TIMEOUT_S)
        try:
            assert type(client) is Redis
            assert await client.ping()
        finally:
            await client.aclose()
        with pytest.raises(IndexUnavailableError, match="certificate verify failed"):
            await open_redis(f"{url}{certs.other_ca}", timeout_s=TIMEOUT_S)


def _assert_masked(exc: BaseException) -> None:
    """The password appears nowhere: not in the message, the traceback, nor any chained cause."""
    text = "".join(traceback.format_exception(exc))
    assert SECRET not in text
    assert "***" in str(exc)


class _StuckClose:
    """A client whose close never completes (a transport that never reports it closed)."""

    closing = False

    async def aclose(self) -> None:
        self.closing = True
        await asyncio.Event().wait()


async def test_a_close_that_never_completes_is_given_up_after_the_timeout() -> None:
    stuck = _StuckClose()
    await asyncio.wait_for(close_redis(stuck, timeout_s=0.2), 5.0)  # type: ignore[arg-type]  # a hang fails
    assert stuck.closing
