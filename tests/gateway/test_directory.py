"""The worker directory's discovery loop never ends on a failure, and says when its list is stale."""

from __future__ import annotations

import asyncio
import dataclasses

from kvgate.gateway.upstream.directory import WorkerDirectory
from kvgate.index.types import IndexUnavailableError, WorkerStatus
from kvgate.proto.ids import WorkerId
from kvgate.proto.trust import sign_record
from kvgate.proto.workers import WorkerInfo
from tests.index.helpers import LOAD, A, B, C, info
from tests.support.fake_clock import FakeMonotonic


class FlakyIndex:
    """Answers ``workers()`` from a script: a list, or an exception to raise."""

    def __init__(self, *script: list[WorkerStatus] | Exception) -> None:
        self.script = list(script)
        self.calls = 0

    async def workers(self) -> list[WorkerStatus]:
        self.calls += 1
        step = self.script[min(self.calls, len(self.script)) - 1]
        if isinstance(step, Exception):
            raise step
        return step


async def test_an_unexpected_failure_does_not_end_discovery() -> None:
    status = WorkerStatus(info(A), LOAD, 10**12, 10**12 - 10_000)
    index = FlakyIndex(RuntimeError("a bug in a backend"), [status])
    directory = WorkerDirectory(index, info(A).fingerprint, refresh_s=0.01)  # type: ignore[arg-type]
    task = asyncio.create_task(directory.run())
    try:
        for _ in range(500):
            if directory.known():
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert [w.info.worker_id for w in directory.known()] == [A]
    assert index.calls >= 2


async def test_the_list_is_stale_after_several_periods_without_a_refresh() -> None:
    clock = FakeMonotonic(100.0)
    index = FlakyIndex([], IndexUnavailableError("redis is down"))
    directory = WorkerDirectory(index, "f" * 32, refresh_s=1.0, monotonic=clock)  # type: ignore[arg-type]
    await directory.refresh()
    clock.now += 4.0
    assert not directory.stale
    await directory.refresh()  # fails: the index is down
    clock.now += 2.0
    assert directory.degraded
    assert directory.stale


SECRET = b"the-deployment-secret-0123456789"
D = WorkerId("worker-d")


def _status(record: WorkerInfo) -> WorkerStatus:
    return WorkerStatus(record, LOAD, 10**12, 10**12 - 10_000)


async def test_only_records_signed_with_the_deployments_key_are_routable(caplog) -> None:
    """A forged record (unsigned, signed by another deployment, or a signed record pointed at another
    address) is refused with its reason, logged once however often it is read."""
    genuine = sign_record(info(A), SECRET)
    forged = [
        dataclasses.replace(info(B), address="6.6.6.6:1"),
        sign_record(info(C), b"another-deployment-secret-012345"),
        dataclasses.replace(sign_record(info(D), SECRET), address="6.6.6.6:2"),
    ]
    index = FlakyIndex([_status(r) for r in [genuine, *forged]])
    directory = WorkerDirectory(index, genuine.fingerprint, secret=SECRET)  # type: ignore[arg-type]
    for _ in range(3):
        await directory.refresh()
    assert [w.info for w in directory.live()] == [genuine]
    assert set(directory.rejected) == {B, C, D}
    assert all("not signed with this deployment's key" in why for why in directory.rejected.values())
    refusals = [r for r in caplog.records if "refusing worker" in r.getMessage()]
    assert len(refusals) == 3


async def test_a_gateway_without_a_secret_refuses_signed_records() -> None:
    """Mixing a keyed and an unkeyed deployment would route with a hit rate of zero: refused."""
    index = FlakyIndex([_status(sign_record(info(A), SECRET)), _status(info(B))])
    directory = WorkerDirectory(index, info(B).fingerprint)  # type: ignore[arg-type]
    await directory.refresh()
    assert [w.info.worker_id for w in directory.live()] == [B]
    assert "no deployment secret" in directory.rejected[A]


async def test_refusals_of_records_gone_from_the_index_are_forgotten() -> None:
    index = FlakyIndex([_status(info(B))], [])
    directory = WorkerDirectory(index, info(B).fingerprint, secret=SECRET)  # type: ignore[arg-type]
    await directory.refresh()
    assert B in directory.rejected
    await directory.refresh()
    assert directory.rejected == {}
