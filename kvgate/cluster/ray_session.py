"""``RaySession``: join an existing Ray cluster or start a private local one; leave it the same way."""

from __future__ import annotations

import os
from dataclasses import dataclass

import ray


@dataclass(frozen=True, slots=True)
class RaySession:
    """One driver's connection to Ray. ``started``: this process started the local Ray instance (so
    :meth:`close` stops it, its processes included); False when it joined ``address``."""

    address: str | None
    started: bool

    @classmethod
    def open(
        cls, address: str | None, *, num_cpus: int | None = None, temp_dir: str | None = None
    ) -> RaySession:
        """Blocking (call before the event loop). ``address`` None: a new local instance without the
        dashboard, with ``num_cpus`` CPUs (None: Ray's count) and its files under ``temp_dir``.
        Otherwise joins the cluster at ``address`` (``host:port`` or ``auto``)."""
        if address is not None:
            ray.init(address=address, log_to_driver=True)
            return cls(address, started=False)
        ray.init(
            include_dashboard=False,
            num_cpus=num_cpus,
            _temp_dir=temp_dir,
            log_to_driver=True,
            configure_logging=False,
        )
        return cls(None, started=True)

    def gpus(self) -> int:
        """Whole GPUs in the cluster right now (0 on a CPU-only cluster)."""
        return int(ray.cluster_resources().get("GPU", 0))

    def close(self) -> None:
        """Disconnects; a local instance this session started is shut down with its processes."""
        ray.shutdown()


def local_cpus(needed: int) -> int:
    """CPUs to declare for a local instance: the machine's, but at least ``needed`` (so the requested
    workers are placed on a small machine, oversubscribing it rather than waiting forever)."""
    return max(os.cpu_count() or 1, needed)
