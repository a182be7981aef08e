"""Which workers this gateway may route to: the index's live workers whose records are signed with the
deployment's key and whose config fingerprint matches the gateway's, minus the ones it just saw fail."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from kvgate.index.base import PrefixIndex, SharedMembership
from kvgate.index.types import IndexUnavailableError, WorkerStatus
from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.trust import record_verified
from kvgate.proto.workers import WorkerInfo

log = logging.getLogger(__name__)


class WorkerDirectory:
    """Refreshed from the index every ``refresh_s`` by :meth:`run` (a task its owner cancels).

    When the index is unavailable the last known list is kept (``degraded`` is True), so requests
    keep flowing on load-based routing. A record not signed under ``secret`` (written by someone
    without the deployment secret, or by another deployment) is refused, and so is a worker whose
    fingerprint differs, instead of silently routing with a hit rate of zero; both are listed in
    ``rejected`` with the reason, and logged once per record. :meth:`run` survives any
    failure of a refresh (logged, then retried); :attr:`stale` says when the list has not been
    refreshed for several periods.
    """

    def __init__(
        self,
        index: PrefixIndex,
        fingerprint: str,
        refresh_s: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
        *,
        secret: bytes = b"",
    ) -> None:
        self._index = index
        self._fingerprint = fingerprint
        self._secret = secret
        self._refresh_s = refresh_s
        self._now = monotonic
        self._workers: list[WorkerStatus] = []
        self._quarantine: dict[WorkerId, tuple[float, Epoch | None]] = {}  # until, incarnation
        self.rejected: dict[WorkerId, str] = {}
        self.degraded = False
        self._refreshed_at = monotonic()

    def known(self) -> list[WorkerStatus]:
        """Every worker of the last refresh, quarantined ones included (no I/O)."""
        return list(self._workers)

    def live(self) -> list[WorkerStatus]:
        """Routable workers now (no I/O)."""
        now = self._now()
        return [w for w in self._workers if self._quarantine.get(w.info.worker_id, (0.0, None))[0] <= now]

    def quarantine(self, worker_id: WorkerId, seconds: float) -> None:
        """Keeps ``worker_id`` out of :meth:`live` for ``seconds`` (it just failed a request), or until
        it comes back as a new incarnation (a higher epoch: restarted)."""
        epoch = next((w.info.epoch for w in self._workers if w.info.worker_id == worker_id), None)
        self._quarantine[worker_id] = (self._now() + seconds, epoch)

    async def refresh(self) -> None:
        """One refresh from the index; never raises IndexUnavailableError."""
        try:
            statuses = await self._index.workers()
        except IndexUnavailableError as exc:
            if not self.degraded:
                log.warning("prefix index unavailable, keeping %d known workers: %s", len(self._workers), exc)
            self.degraded = True
            return
        self.degraded = False
        self._refreshed_at = self._now()
        self._workers = [s for s in statuses if self._accept(s)]
        present = {s.info.worker_id for s in statuses}  # refusals of records gone are forgotten
        self.rejected = {w: why for w, why in self.rejected.items() if w in present}
        now, epochs = self._now(), {w.info.worker_id: w.info.epoch for w in self._workers}
        # a quarantine ends when it expires, or when the worker restarted (a new incarnation)
        self._quarantine = {
            w: (until, epoch) for w, (until, epoch) in self._quarantine.items()
            if until > now and epochs.get(w, epoch) == epoch
        }  # fmt: skip

    @property
    def unfollowed(self) -> int:
        """Known workers whose holdings the index does not follow (routed on what the router
        learned from its own decisions)."""
        return sum(1 for w in self._workers if not w.followed)

    @property
    def shared_reachable(self) -> bool | None:
        """Whether the shared index (Redis) answered the index's last membership read; None when
        the index has no shared part."""
        return self._index.shared_reachable if isinstance(self._index, SharedMembership) else None

    @property
    def stale(self) -> bool:
        """No refresh has succeeded for three periods (and at least 5 s): the list may be out of date."""
        return self._now() - self._refreshed_at > max(3 * self._refresh_s, 5.0)

    async def run(self, after_refresh: Callable[[], Awaitable[None]] | None = None) -> None:
        """Refreshes forever, awaiting ``after_refresh`` after each refresh; cancel the task to stop.
        A refresh that fails unexpectedly is logged and retried next period: discovery never ends."""
        while True:
            try:
                await self.refresh()
                if after_refresh is not None:
                    await after_refresh()
            except Exception:
                log.exception("worker discovery failed; retrying in %.1f s", self._refresh_s)
            await asyncio.sleep(self._refresh_s)

    def _accept(self, status: WorkerStatus) -> bool:
        info = status.info
        reason = self._refusal(info)
        if reason is None:
            self.rejected.pop(info.worker_id, None)
            return True
        if self.rejected.get(info.worker_id) != reason:
            log.error("refusing worker %s at %s: %s", info.worker_id, info.address, reason)
        self.rejected[info.worker_id] = reason
        return False

    def _refusal(self, info: WorkerInfo) -> str | None:
        """Why ``info`` may not be routed to; None when it may."""
        if not record_verified(info, self._secret):
            if not self._secret:
                return "its record is signed, but this gateway has no deployment secret"
            return ("its record is not signed with this deployment's key (a worker with another "
                    "KVGATE_HASH_SECRET, or a record written by someone else)")  # fmt: skip
        if info.fingerprint != self._fingerprint:
            return f"config fingerprint {info.fingerprint} != gateway's {self._fingerprint}"
        return None
