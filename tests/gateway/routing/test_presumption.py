"""HomePresumption and presume_home: a gateway presumes a prompt it never saw is cached on its soft
home as far as replies taught it to, and only when that is worth the opening another worker holds."""

from __future__ import annotations

import pytest

from kvgate.gateway.routing.presumption import HomePresumption, presume_home
from kvgate.index.types import LookupResult, PrefixMatch
from kvgate.proto.ids import WorkerId

HOME, OTHER = WorkerId("home"), WorkerId("other")


def lookup(runs: dict[WorkerId, int], chunks: int = 20) -> LookupResult:
    return LookupResult(chunks, {w: PrefixMatch(w, "G" * n) for w, n in runs.items()})


def test_trust_follows_the_outcomes_of_presumptions_only() -> None:
    presumption = HomePresumption(initial=0.5, rate=0.5)
    presumption.made(ticket=1, opening_tokens=256)
    presumption.outcome(1, reused_tokens=1024)  # the home held more than the opening: right
    assert presumption.trust == pytest.approx(0.75)
    presumption.made(ticket=2, opening_tokens=256)
    presumption.outcome(2, reused_tokens=256)  # only the opening: the prompt was new
    assert presumption.trust == pytest.approx(0.375)
    presumption.outcome(3, reused_tokens=10_000)  # never a presumption: no change
    presumption.outcome(2, reused_tokens=10_000)  # reported twice: counted once
    assert presumption.trust == pytest.approx(0.375)


def test_presumptions_awaiting_an_outcome_are_bounded() -> None:
    presumption = HomePresumption(max_open=2)
    for ticket in range(5):
        presumption.made(ticket, 0)
    assert len(presumption) == 2
    with pytest.raises(ValueError, match="initial"):
        HomePresumption(initial=1.5)


def test_the_home_is_presumed_to_hold_the_opening_and_trust_of_the_own_content() -> None:
    presumption = HomePresumption(initial=0.5)
    presumed, home = presume_home(lookup({HOME: 4, OTHER: 4}), 20, HOME, 4, presumption)
    assert home == HOME
    assert presumed.match_for(HOME).chunks == 4 + 8  # half of the 16 own chunks
    assert presumed.match_for(OTHER).chunks == 4


def test_no_presumption_where_the_gateway_knows_the_own_content_or_trusts_nothing() -> None:
    trusting = HomePresumption(initial=0.5)
    known = lookup({OTHER: 10})  # another worker holds past the opening (4): this gateway knows
    assert presume_home(known, 20, HOME, 4, trusting) == (known, None)
    held = lookup({HOME: 20})
    assert presume_home(held, 20, HOME, 4, trusting) == (held, None)
    alone = HomePresumption(initial=0.0)  # a gateway whose presumptions never paid
    opening = lookup({HOME: 4, OTHER: 4})
    assert presume_home(opening, 20, HOME, 4, alone) == (opening, None)


def test_a_home_lacking_the_opening_is_presumed_only_when_the_expected_gain_beats_the_loss() -> None:
    """The opening (8 chunks) is known held elsewhere, not at the home: presuming risks it."""
    elsewhere = lookup({OTHER: 8})
    sure = HomePresumption(initial=0.8)  # 0.8 x 12 own chunks >= 0.2 x 8
    assert presume_home(elsewhere, 20, HOME, 8, sure)[1] == HOME
    doubtful = HomePresumption(initial=0.3)  # 0.3 x 12 < 0.7 x 8
    assert presume_home(elsewhere, 20, HOME, 8, doubtful) == (elsewhere, None)
