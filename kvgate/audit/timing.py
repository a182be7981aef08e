"""The audit itself, against a running gateway, in the spirit of the published prompt-caching audits.

For each sample ``i`` the victim tenant sends a fresh secret prompt ``P_i`` (now cached under its
salt). Then:

- **cross-tenant** (the attack): the attacker tenant probes ``P_i`` (a hit if caches were shared) and
  a fresh prompt ``Q_i`` of the same length (a miss) and times each to its first token;
- **same tenant** (positive control): the victim sends ``P_i`` again (a hit) and a fresh ``R_i`` (a
  miss), timed the same way.

The order inside each pair is random, so drift cannot favour one side. Within one tenant the hit and
miss times must differ (the cache works, and the measurement can see it); across tenants they must
not (a two-sample KS test that cannot reject "same distribution").
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from kvgate.audit.ks import ks_2samp

_WORDS = ("amber", "basil", "cedar", "delta", "ember", "fjord", "grove", "harbor", "iris", "juniper",
          "kestrel", "lumen", "meadow", "nectar", "orchid", "pebble", "quartz", "raven", "saffron",
          "tundra", "umber", "violet", "willow", "xenon", "yarrow", "zephyr")  # fmt: skip


@dataclass(frozen=True)
class Comparison:
    """TTFTs of hit candidates and of misses, and the KS test between them."""

    hit_ttft_s: list[float]
    miss_ttft_s: list[float]
    ks_d: float = field(init=False)
    p_value: float = field(init=False)

    def __post_init__(self) -> None:
        d, p = ks_2samp(self.hit_ttft_s, self.miss_ttft_s)
        object.__setattr__(self, "ks_d", d)
        object.__setattr__(self, "p_value", p)

    def summary(self) -> dict[str, float]:
        return {
            "samples": len(self.hit_ttft_s),
            "hit_median_s": statistics.median(self.hit_ttft_s),
            "miss_median_s": statistics.median(self.miss_ttft_s),
            "ks_d": self.ks_d,
            "p_value": self.p_value,
        }


@dataclass(frozen=True)
class AuditResult:
    same_tenant: Comparison
    cross_tenant: Comparison


@dataclass(frozen=True)
class Target:
    """Where and as whom: the gateway's base URL, the served model, and the two tenants' keys."""

    url: str
    model: str
    victim_key: str
    attacker_key: str


async def run_audit(
    target: Target,
    samples: int = 30,
    prompt_words: int = 300,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> AuditResult:
    """Runs ``samples`` rounds (4 timed probes and one warm-up each); ``progress(done, total)``."""
    rng = random.Random(seed)
    fresh = lambda: " ".join(rng.choice(_WORDS) for _ in range(prompt_words))  # noqa: E731
    pairs: dict[str, tuple[list[float], list[float]]] = {"same": ([], []), "cross": ([], [])}
    async with httpx.AsyncClient(base_url=target.url, timeout=300) as client:
        victim = _Prober(client, target.model, target.victim_key)
        attacker = _Prober(client, target.model, target.attacker_key)
        for i in range(samples):
            secret = fresh()
            await victim.ttft(secret)
            for name, prober in (("cross", attacker), ("same", victim)):
                hits, misses = pairs[name]
                probes = [(hits, secret), (misses, fresh())]
                rng.shuffle(probes)
                for into, prompt in probes:
                    into.append(await prober.ttft(prompt))
            if progress is not None:
                progress(i + 1, samples)
    return AuditResult(Comparison(*pairs["same"]), Comparison(*pairs["cross"]))


class _Prober:
    def __init__(self, client: httpx.AsyncClient, model: str, key: str) -> None:
        self._client, self._model = client, model
        self._headers = {"authorization": f"Bearer {key}"}

    async def ttft(self, prompt: str) -> float:
        """Seconds from sending ``prompt`` (as the system message) to the first streamed event."""
        body = {
            "model": self._model,
            "messages": [{"role": "system", "content": prompt}, {"role": "user", "content": "Go."}],
            "max_tokens": 1,
            "temperature": 0,
            "stream": True,
        }
        start = time.monotonic()
        stream = self._client.stream("POST", "/v1/chat/completions", json=body, headers=self._headers)
        async with stream as reply:
            if reply.status_code != 200:
                raise RuntimeError(f"probe failed: {reply.status_code} {(await reply.aread())[:200]!r}")
            first: float | None = None
            async for line in reply.aiter_lines():  # read to the end: the next probe starts idle
                if first is None and line.startswith("data:"):
                    first = time.monotonic() - start
        if first is not None:
            return first
        raise RuntimeError("the stream ended without an event")
