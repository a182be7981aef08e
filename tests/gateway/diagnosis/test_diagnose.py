"""Each cause of the diagnosis, produced on purpose from records (no servers): the function is pure."""

from __future__ import annotations

import numpy as np

from kvgate.gateway.diagnosis import Cause
from kvgate.gateway.diagnosis.compare import compare
from kvgate.gateway.diagnosis.diagnose import Layout, diagnose
from kvgate.gateway.diagnosis.record import RequestRecord, RouteNote, Scope, WorkerMark
from tests.gateway.diagnosis.records import SCOPE, record, tokens

LAYOUT = Layout(chunk_size=128, block_size=16)
PROMPT = tokens(900, seed=1)  # reusable: 896 tokens (7 whole chunks)
W0, W1 = WorkerMark("w0", 1), WorkerMark("w1", 1)


def run(
    current: RequestRecord, *earlier: RequestRecord, workers: dict | None = None, excerpt: str | None = None
):
    workers = {"w0": W0, "w1": W1} if workers is None else workers
    return diagnose(current, compare(current, list(earlier), LAYOUT.chunk_size), workers, LAYOUT, excerpt)


def test_an_exact_repeat_that_reused_everything_is_a_hit() -> None:
    found = run(record("r2", PROMPT, cached=896), record("r1", PROMPT))
    assert (found.cause, found.first_divergent_token, found.missed_tokens) == (Cause.HIT, None, 0)


def test_a_shared_prefix_all_reused_then_a_new_question_is_a_hit() -> None:
    second = np.concatenate([PROMPT[:512], tokens(300, seed=2)])
    found = run(record("r2", second, cached=512), record("r1", PROMPT))
    assert found.cause is Cause.HIT
    assert found.evidence["similar_request"] == "r1"


def test_nothing_similar_is_a_new_prefix() -> None:
    found = run(record("r2", PROMPT), record("r1", tokens(900, seed=3)))
    assert (found.cause, found.first_divergent_token, found.missed_tokens) == (Cause.NEW_PREFIX, 0, 896)


def test_a_prompt_shorter_than_a_chunk_is_below_chunk() -> None:
    found = run(record("r2", PROMPT[:100]), record("r1", PROMPT[:100]))
    assert found.cause is Cause.BELOW_CHUNK


def test_a_prompt_with_no_whole_chunk_is_below_chunk_whatever_earlier_requests_hold() -> None:
    """Its content reordered or edited is not the cause: no order of it could have been reused."""
    short = PROMPT[:120]
    for earlier in (np.concatenate([short[60:], short[:60]]), np.concatenate([short[:50], [7], short[51:]])):
        found = run(record("r2", short), record("r1", earlier))
        assert (found.cause, found.first_divergent_token) == (Cause.BELOW_CHUNK, 0)


def test_a_common_opening_shorter_than_a_chunk_is_below_chunk() -> None:
    second = np.concatenate([PROMPT[:90], tokens(810, seed=4)])
    found = run(record("r2", second), record("r1", PROMPT))
    assert (found.cause, found.first_divergent_token) == (Cause.BELOW_CHUNK, 90)


def test_a_timestamp_inserted_at_token_300_is_changed_content_there() -> None:
    stamp = np.array([11, 22, 33, 44, 55])
    second = np.concatenate([PROMPT[:300], stamp, PROMPT[300:]])
    found = run(record("r2", second, cached=256), record("r1", PROMPT), excerpt="Date: 2025-06-01 12:00")
    assert (found.cause, found.first_divergent_token) == (Cause.CHANGED_CONTENT, 300)
    assert found.missed_tokens == 896 - 256
    assert found.evidence["excerpt"] == "Date: 2025-06-01 12:00"
    assert "2025-06-01" in found.detail


def test_changed_text_that_does_not_look_volatile_is_not_shown() -> None:
    second = np.concatenate([PROMPT[:300], [7, 8, 9], PROMPT[303:]])
    found = run(record("r2", second, cached=256), record("r1", PROMPT), excerpt="the secret plan")
    assert found.cause is Cause.CHANGED_CONTENT
    assert "excerpt" not in found.evidence
    assert "secret" not in found.detail


def test_two_halves_swapped_are_reordered() -> None:
    swapped = np.concatenate([PROMPT[450:], PROMPT[:450]])
    found = run(record("r2", swapped), record("r1", PROMPT))
    assert (found.cause, found.first_divergent_token) == (Cause.REORDERED, 0)


def test_the_same_prompt_under_another_salt_is_a_different_scope() -> None:
    other = Scope(SCOPE.model, salt=SCOPE.salt + "\x1fexperiment")
    found = run(record("r2", PROMPT, scope=other), record("r1", PROMPT))
    assert found.cause is Cause.DIFFERENT_SCOPE
    assert found.evidence["scope_differences"] == ["cache_salt"]


def test_a_repeat_after_its_blocks_expired_is_evicted_by_ttl() -> None:
    later = {"w0": WorkerMark("w0", 1, evicted_ttl_blocks=56), "w1": W1}
    found = run(record("r2", PROMPT, at_s=1400.0), record("r1", PROMPT, served=W0), workers=later)
    assert (found.cause, found.evidence["eviction"]) == (Cause.EVICTED, "ttl")
    assert found.first_divergent_token == 0
    # which kinds of eviction, never how many: the worker's counters count every tenant's blocks
    assert found.evidence["evicted_since"] == {"ttl": True, "capacity": False}
    assert "56" not in str(found.evidence) + found.detail


def test_blocks_dropped_to_make_room_are_evicted_by_capacity() -> None:
    later = {"w0": WorkerMark("w0", 1, evicted_pressure_blocks=12), "w1": W1}
    found = run(record("r2", PROMPT, cached=128), record("r1", PROMPT, served=W0), workers=later)
    assert (found.cause, found.evidence["eviction"]) == (Cause.EVICTED, "capacity")
    assert found.first_divergent_token == 128


def test_a_restarted_worker_lost_what_it_held() -> None:
    later = {"w0": WorkerMark("w0", 2), "w1": W1}
    found = run(record("r2", PROMPT), record("r1", PROMPT, served=W0), workers=later)
    assert (found.cause, found.evidence["eviction"]) == (Cause.EVICTED, "worker_restarted")


def test_a_request_sent_away_from_its_holder_for_load_is_routed_elsewhere() -> None:
    route = RouteNote("w1", "load_override", 0, best_holder="w0", best_holder_tokens=896)
    found = run(record("r2", PROMPT, route=route), record("r1", PROMPT))
    assert (found.cause, found.evidence["better_worker"], found.evidence["why"]) == (
        Cause.ROUTED_ELSEWHERE,
        "w0",
        "load",
    )


def test_a_retry_away_from_the_holder_is_routed_elsewhere_for_the_retry_not_the_policy() -> None:
    # w0 held the prompt and refused it (busy); the retry's decision among the others reads new_prefix
    route = RouteNote("w1", "new_prefix", 0, best_holder="w0", best_holder_tokens=896, attempts=2)
    found = run(record("r2", PROMPT, route=route), record("r1", PROMPT))
    assert (found.cause, found.evidence["better_worker"], found.evidence["attempts"]) == (
        Cause.ROUTED_ELSEWHERE,
        "w0",
        2,
    )
    assert found.evidence["why"] == "it was retried there after 1 failed or busy attempt(s)"


def test_a_retry_after_the_holder_was_purged_names_the_earlier_worker() -> None:
    route = RouteNote("w1", "new_prefix", 0, attempts=3)  # the failed holder left the index
    found = run(record("r2", PROMPT, route=route), record("r1", PROMPT))
    assert (found.cause, found.evidence["better_worker"]) == (Cause.ROUTED_ELSEWHERE, "w0")
    assert "after 2 failed or busy attempt(s)" in found.evidence["why"]


def test_a_holder_the_index_did_not_show_is_routed_elsewhere_for_staleness() -> None:
    found = run(record("r2", PROMPT, route=RouteNote("w1", "new_prefix", 0)), record("r1", PROMPT))
    assert found.cause is Cause.ROUTED_ELSEWHERE
    assert "staleness" in found.evidence["why"]


def test_an_unavailable_holder_is_routed_elsewhere_for_unavailability() -> None:
    workers = {"w0": WorkerMark("w0", 1, live=False), "w1": W1}
    found = run(
        record("r2", PROMPT, route=RouteNote("w1", "new_prefix", 0)), record("r1", PROMPT), workers=workers
    )
    assert (found.cause, found.evidence["why"]) == (Cause.ROUTED_ELSEWHERE, "that worker was unavailable")


def test_another_tenants_requests_are_never_compared() -> None:
    found = run(record("r2", PROMPT), record("r1", PROMPT, tenant="b"))
    assert found.cause is Cause.NEW_PREFIX
    assert "r1" not in str(found.evidence)
