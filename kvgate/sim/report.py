"""The human-readable view of a :class:`SimReport`: one table, references first."""

from __future__ import annotations

from kvgate.gateway.routing import PEER_POLICIES
from kvgate.sim.results import PolicyResult, SimReport

_HEADER = (
    f"{'policy':<20}{'hit rate':>9}{'/pooled':>9}{'imbalance':>10}{'TTFT p50':>10}{'TTFT p99':>10}"
    f"{'queue p99':>10}{'pred err':>9}{'wall s':>8}"
)


def format_table(report: SimReport) -> str:
    """A fixed-width table: the two reference hit rates, then one row per policy (pure)."""
    sim = report.settings["sim"]
    pooled = report.pooled_hit_rate
    lines = [
        f"{report.requests} requests, {report.prompt_tokens:,} prompt tokens; {sim['workers']} workers"
        f" x {sim['capacity_tokens']:,} GPU + {sim['cpu_capacity_tokens']:,} CPU tokens;"
        f" speed x{sim['speed']:g}",
        f"{'unlimited cache':<20}{report.unlimited_hit_rate:>9.3f}",
        f"{'pooled LRU':<20}{pooled:>9.3f}",
        "",
        _HEADER,
    ]
    for name, r in report.policies.items():
        ratio = r.hit_rate / pooled if pooled > 0 else float("nan")
        lines.append(
            f"{name:<20}{r.hit_rate:>9.3f}{ratio:>9.3f}{r.imbalance:>10.3f}{r.ttft_p50_s:>10.3f}"
            f"{r.ttft_p99_s:>10.3f}{r.queue_p99_s:>10.3f}{r.prediction_error:>9.3f}{r.wall_s:>8.1f}"
        )
    warmed = [f"{name} {r.warm_up_tokens:,}" for name, r in report.policies.items() if r.warm_up_tokens]
    if warmed:
        lines += ["", "warm-ups (tokens prefilled ahead of demand, in no hit rate): " + ", ".join(warmed)]
    fetched = [f"{name} {r.fetch_rate:.4f}" for name, r in report.policies.items() if r.fetch_rate]
    if fetched:
        head = "fetched from a KV source (share of prompt tokens, in the hit rate): "
        lines += ["", head + ", ".join(fetched)]
    return "\n".join([*lines, *_standing(report), *_losses(report)])


def _losses(report: SimReport) -> list[str]:
    """Where each policy's hit rate went against the unlimited cache, by decision reason."""
    rows = [
        f"{name:<20}" + ", ".join(f"{reason} {share:.4f}" for reason, share in r.lost_by_reason.items())
        for name, r in report.policies.items()
        if r.lost_by_reason
    ]
    if not rows:
        return []
    return ["", "lost against the unlimited cache, by reason (share of prompt tokens):", *rows]


def _standing(report: SimReport) -> list[str]:
    """kvgate's hit rate against the best peer's and the pooled cache's, and its TTFT p99 against
    the best of the other policies' (and of the peers'); nothing unless kvgate ran beside another."""
    policies = report.policies
    kvgate = policies.get("kvgate")
    others = {name: r for name, r in policies.items() if name != "kvgate"}
    if kvgate is None or not others:
        return []
    pooled = report.pooled_hit_rate
    hit = f"  hit rate {kvgate.hit_rate:.4f}"
    if pooled > 0:
        hit += f", {kvgate.hit_rate / pooled:.3f}x pooled"
    peers = {name: r for name, r in others.items() if name in PEER_POLICIES}
    if peers:
        name, best = max(peers.items(), key=lambda p: p[1].hit_rate)
        hit += f"; best peer {name} {best.hit_rate:.4f} ({kvgate.hit_rate - best.hit_rate:+.4f})"
    p99 = f"  TTFT p99 {kvgate.ttft_p99_s:.2f} s; best other {_fastest(others)}"
    if peers and set(peers) != set(others):
        p99 += f"; best peer {_fastest(peers)}"
    return ["", "kvgate against the others:", hit, p99]


def _fastest(policies: dict[str, PolicyResult]) -> str:
    name, best = min(policies.items(), key=lambda p: p[1].ttft_p99_s)
    return f"{name} {best.ttft_p99_s:.2f} s"
