"""Keys (hashed at rest, any entry matched in constant time), key files, salts and rate limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvgate.gateway.tenancy import (
    ANONYMOUS,
    Caller,
    KeyRing,
    RateLimit,
    RateLimiter,
    Tenant,
    hash_key,
    new_key,
)
from kvgate.gateway.tenancy.config import key_ring, key_ring_from_env, load_key_ring
from kvgate.gateway.tenancy.rate_limit import RequestTooLargeError
from tests.support.fake_clock import FakeMonotonic

ONE_KEY = '[[tenant]]\nname = "a"\nkeys = ["sha256:' + "0" * 64 + '"]\n'
ACME, BETA = Tenant("acme"), Tenant("beta", shared_namespaces=frozenset({"public"}))


def test_a_key_authenticates_its_tenant_and_nothing_else() -> None:
    keys = {t.name: new_key() for t in (ACME, BETA)}
    ring = KeyRing([(hash_key(keys["acme"]), ACME), (hash_key(keys["beta"]), BETA)])
    assert ring.authenticate(keys["acme"]) is ACME
    assert ring.authenticate(keys["beta"]) is BETA
    for wrong in (None, "", keys["acme"][:-1], keys["acme"] + "x", hash_key(keys["acme"]), "k" * 10_000):
        assert ring.authenticate(wrong) is None


def test_keys_are_configured_only_by_their_hash() -> None:
    with pytest.raises(ValueError, match="by their hash"):
        KeyRing([("kvg-plain-key", ACME)])
    with pytest.raises(ValueError, match="not a SHA-256 digest"):
        KeyRing([("sha256:abcd", ACME)])
    with pytest.raises(ValueError, match="two tenants"):
        KeyRing([(hash_key("k"), ACME), (hash_key("k"), BETA)])


def test_new_keys_are_long_and_random() -> None:
    keys = {new_key() for _ in range(100)}
    assert len(keys) == 100
    assert all(k.startswith("kvg-") and len(k) >= 40 for k in keys)


def test_a_key_file_defines_tenants_limits_and_namespaces(tmp_path: Path) -> None:
    path = tmp_path / "keys.toml"
    path.write_text(
        f'[[tenant]]\nname = "acme"\nkeys = ["{hash_key("a1")}", "{hash_key("a2")}"]\n'
        f"requests_per_minute = 60\ntokens_per_minute = 1000\n"
        f'[[tenant]]\nname = "beta"\nkeys = ["{hash_key("b")}"]\nshared_namespaces = ["public"]\n'
    )
    ring = load_key_ring(path)
    acme = ring.authenticate("a2")
    assert acme is not None
    assert acme.name == "acme"
    assert acme.rate == RateLimit(60, 1000)
    assert ring.authenticate("b").shared_namespaces == {"public"}
    assert key_ring(path, f"x={hash_key('x')}") is not None  # the file wins over the variable
    assert key_ring(None, None) is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("not toml [", "cannot read"),
        ('[[tenant]]\nname = "a"\n', "'keys' must be"),
        ('[[tenant]]\nname = "a b"\nkeys = ["sha256:' + "0" * 64 + '"]\n', "must match"),
        ('[[tenant]]\nname = "a"\nkeys = ["sha256:' + "0" * 64 + '"]\nrpm = 3\n', "unknown fields"),
        ('[[tenant]]\nname = "a"\nkeys = ["sha256:' + "0" * 64 + '"]\nrequests_per_minute = 0\n', "positive"),
        (('[[tenant]]\nname = "a"\nkeys = ["sha256:' + "0" * 64 + '"]\n') * 2, "defined twice"),
        (ONE_KEY + 'shared_namespaces = "public"\n', "list of"),
        (ONE_KEY + "requests_per_minute = true\n", "positive"),
    ],
)
def test_a_bad_key_file_is_a_clear_error(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "keys.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=fragment):
        load_key_ring(path)


def test_keys_from_the_environment() -> None:
    ring = key_ring_from_env(f"acme={hash_key('k1')}, beta={hash_key('k2')}")
    assert ring.authenticate("k2").name == "beta"
    with pytest.raises(ValueError, match="expected name="):
        key_ring_from_env("just-a-key")


def test_salts_are_derived_from_the_tenant_and_namespaces_are_opt_in() -> None:
    assert Caller(ACME).cache_salt() != Caller(BETA).cache_salt()
    assert Caller(ANONYMOUS).cache_salt() == ""  # one tenant: hashes as without tenants
    assert (
        Caller(BETA, "public").cache_salt()
        == Caller(Tenant("gamma", shared_namespaces=frozenset({"public"})), "public").cache_salt()
    )
    with pytest.raises(PermissionError):
        Caller(ACME, "public").cache_salt()
    with pytest.raises(PermissionError):  # a namespace spelled like a tenant's salt is just unknown
        Caller(ACME, "tenant:beta").cache_salt()


def test_requests_per_minute_admit_a_burst_then_ask_to_wait() -> None:
    clock = FakeMonotonic(100.0)
    limiter = RateLimiter(clock)
    tenant = Tenant("acme", RateLimit(requests_per_minute=3))
    assert [limiter.count_request(tenant) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = limiter.count_request(tenant)
    assert wait == pytest.approx(20.0)  # one request refills every 60/3 s
    clock.now += 20.0
    assert limiter.count_request(tenant) == 0.0
    assert limiter.count_request(tenant) > 0  # the refused one was not counted, this one is the 4th
    assert limiter.count_request(Tenant("beta", RateLimit(requests_per_minute=3))) == 0.0  # per tenant


def test_tokens_per_minute_are_charged_only_when_admitted() -> None:
    clock = FakeMonotonic(100.0)
    limiter = RateLimiter(clock)
    tenant = Tenant("acme", RateLimit(requests_per_minute=100, tokens_per_minute=1000))
    assert limiter.admit(tenant, 900) == 0.0
    assert limiter.admit(tenant, 200) == pytest.approx(6.0)  # 100 tokens missing at 1000/min
    assert limiter.admit(tenant, 100) == 0.0  # the refused request charged nothing
    assert limiter.count_request(tenant) == pytest.approx(0.06)  # not even one token left
    with pytest.raises(RequestTooLargeError):
        limiter.admit(tenant, 1001)
    assert limiter.admit(Tenant("free"), 10**9) == 0.0  # no limits configured
