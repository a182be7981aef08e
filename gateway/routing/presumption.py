"""Whether to presume that a prompt this gateway has never seen is cached on its soft home.

Without worker events, a gateway knows only what it sent. When other replicas route too, a prompt
whose own content (what follows the deepest point where prompts part ways, see
:class:`~kvgate.gateway.routing.branches.PrefixBranches`) this gateway never saw is often the next
turn of a conversation another replica placed -- on the soft home, since every replica picks the
same one. Presuming the home holds the whole prompt sends the turn there; when the prompt is new
after all, the presumption costs the shared opening the home lacks (another worker holds it).

The gateway learns which is the case from the replies to its own presumptions (did the home reuse
more than the shared opening?), as a moving average ``trust``; it presumes the home holds the
opening and ``trust`` of the own content (the reuse it expects), when the expected gain beats the
expected loss: ``trust x own chunks >= (1 - trust) x opening chunks held elsewhere`` (a home this
gateway already knows to hold the opening costs nothing). A gateway alone learns that its
presumptions fail: ``trust`` falls towards 0, and with it what it presumes.
"""

from __future__ import annotations

from collections import OrderedDict

from kvgate.index.types import LookupResult
from kvgate.proto.ids import Tier, WorkerId


class HomePresumption:
    """``trust`` starts at ``initial`` and moves ``rate`` of the way to each outcome (1: the home
    reused more than the opening, 0: it did not); at most ``max_open`` presumptions await their
    outcome (the oldest are dropped: a request that failed never reports)."""

    def __init__(self, initial: float = 0.5, rate: float = 0.02, max_open: int = 100_000) -> None:
        if not 0 <= initial <= 1 or not 0 < rate <= 1 or max_open < 1:
            raise ValueError("initial must lie in [0, 1], rate in (0, 1], max_open >= 1")
        self.trust = initial
        self._rate = rate
        self._max_open = max_open
        self._open: OrderedDict[int, int] = OrderedDict()  # ticket -> opening tokens

    def worth_it(self, own_chunks: int, opening_elsewhere: int, home_has_opening: bool) -> bool:
        """Whether to presume the home holds a prompt with ``own_chunks`` chunks of its own, whose
        opening this gateway knows held on another worker for ``opening_elsewhere`` chunks."""
        if home_has_opening:
            return True
        return self.trust * own_chunks >= (1 - self.trust) * opening_elsewhere

    def made(self, ticket: int, opening_tokens: int) -> None:
        """The request of ``ticket`` went to its home on a presumption; its opening is
        ``opening_tokens`` long."""
        self._open[ticket] = opening_tokens
        while len(self._open) > self._max_open:
            self._open.popitem(last=False)

    def outcome(self, ticket: int, reused_tokens: int) -> None:
        """The home reused ``reused_tokens`` of the request of ``ticket`` (no-op unless it was a
        presumption awaiting its outcome)."""
        opening = self._open.pop(ticket, None)
        if opening is not None:
            hit = 1.0 if reused_tokens > opening else 0.0
            self.trust += self._rate * (hit - self.trust)

    def __len__(self) -> int:
        return len(self._open)


def presume_home(
    lookup: LookupResult, num_chunks: int, home: WorkerId, own: int, presumption: HomePresumption
) -> tuple[LookupResult, WorkerId | None]:
    """``lookup`` (what this gateway learned, for workers it does not follow) with ``home`` presumed to
    hold the prompt's opening (its first ``own`` chunks) and ``trust`` of its ``num_chunks - own``
    chunks of own content, and ``home`` -- when no worker is known here to hold more than the opening
    (nothing of the prompt's own content was seen here), that is more than the home is known to
    hold, and ``presumption`` finds it worth it; else ``lookup`` unchanged and None."""
    known = lookup.match_for(home)
    held = known.tiers if known is not None else ""
    elsewhere = max((m.chunks for m in lookup.matches.values()), default=0)
    run = own + round(presumption.trust * (num_chunks - own))
    if elsewhere > own or run <= len(held):
        return lookup, None
    if not presumption.worth_it(num_chunks - own, elsewhere, len(held) >= own):
        return lookup, None
    return lookup.with_runs({home: held + Tier.GPU.value * (run - len(held))}), home
