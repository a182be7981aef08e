"""PrefixBranches: where the prompts a gateway saw part ways, so a prompt's own content (and with it
its soft home) is the same for every turn of a conversation."""

from __future__ import annotations

import pytest

from kvgate.gateway.routing.branches import PrefixBranches
from kvgate.proto.ids import ChunkHash


def chain(*ids: int) -> list[ChunkHash]:
    return [ChunkHash(i.to_bytes(16, "big")) for i in ids]


SYSTEM = [1, 2, 3]


def test_a_prompt_never_seen_to_branch_has_its_own_content_from_the_start() -> None:
    branches = PrefixBranches()
    assert branches.own_start(chain(*SYSTEM, 10)) == 0
    branches.record(chain(*SYSTEM, 10, 11))
    assert branches.own_start(chain(*SYSTEM, 10, 11, 12)) == 0  # an extension is no branch


def test_own_content_starts_after_the_deepest_branch_and_stays_put_over_the_turns() -> None:
    branches = PrefixBranches()
    branches.record(chain(*SYSTEM, 10, 11))  # conversation A, turn 1
    branches.record(chain(*SYSTEM, 20, 21))  # conversation B parts ways after the system prompt
    assert branches.own_start(chain(*SYSTEM, 30)) == 3  # a new conversation's own content
    turns = [chain(*SYSTEM, 10, 11), chain(*SYSTEM, 10, 11, 12, 13), chain(*SYSTEM, 10, 11, 12, 13, 14)]
    for turn in turns:
        assert branches.own_start(turn) == 3
        branches.record(turn)


def test_the_last_chunk_cannot_start_a_branch_of_its_own() -> None:
    branches = PrefixBranches()
    branches.record(chain(*SYSTEM, 10))
    branches.record(chain(*SYSTEM, 20))
    assert branches.own_start(chain(*SYSTEM)) == 0  # the branch lies past this prompt's end
    assert branches.own_start(chain(*SYSTEM, 10)) == 3


def test_the_record_is_bounded_least_recently_recorded_first() -> None:
    branches = PrefixBranches(max_entries=4)
    branches.record(chain(1, 2))
    branches.record(chain(1, 3))  # a branch at 1
    branches.record(chain(5, 6, 7, 8, 9))  # pushes chunk 1 out
    assert len(branches) == 4
    assert branches.own_start(chain(1, 2)) == 0
    with pytest.raises(ValueError, match="max_entries"):
        PrefixBranches(max_entries=0)
