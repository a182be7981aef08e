"""Signed worker records and the call token: what the deployment secret proves."""

from __future__ import annotations

import dataclasses

import pytest

from kvgate.proto.ids import Epoch, WorkerId
from kvgate.proto.trust import call_token, derive, record_verified, sign_record, token_matches
from kvgate.proto.workers import WorkerInfo

SECRET = b"a-deployment-secret-of-32-bytes!"
INFO = WorkerInfo(WorkerId("worker-0"), Epoch(7), "10.0.0.5:50100", "f" * 32, "m", "10.0.0.5:9400", "node-a")


def test_a_signed_record_verifies_under_its_secret_only() -> None:
    signed = sign_record(INFO, SECRET)
    assert signed.signature.startswith("v1:")
    assert len(signed.signature) == 3 + 64
    assert record_verified(signed, SECRET)
    assert not record_verified(signed, b"another-secret-of-the-same-size!")
    assert not record_verified(INFO, SECRET)  # unsigned


@pytest.mark.parametrize(
    "change",
    [
        {"worker_id": "worker-1"}, {"epoch": 8}, {"address": "6.6.6.6:50100"}, {"fingerprint": "e" * 32},
        {"model_id": "n"}, {"metrics_address": "6.6.6.6:9400"}, {"node_id": "node-b"},
    ],
)  # fmt: skip
def test_the_signature_covers_every_field(change: dict) -> None:
    """A copied record pointed elsewhere (or altered in any field) no longer verifies."""
    forged = dataclasses.replace(sign_record(INFO, SECRET), **change)
    assert not record_verified(forged, SECRET)


@pytest.mark.parametrize("signature", ["", "v1:", "v1:" + "0" * 64, "v2:" + "0" * 64, "garbage", "v1:ü"])
def test_malformed_signatures_are_refused_not_raised(signature: str) -> None:
    assert not record_verified(dataclasses.replace(INFO, signature=signature), SECRET)


def test_without_a_secret_records_are_unsigned_and_signed_ones_refused() -> None:
    assert sign_record(INFO, b"").signature == ""
    assert record_verified(INFO, b"")
    assert not record_verified(sign_record(INFO, SECRET), b"")  # another deployment's worker


def test_each_purpose_has_its_own_key_and_the_token_is_not_the_secret() -> None:
    assert derive(SECRET, "worker-record") != derive(SECRET, "worker-call")
    token = call_token(SECRET)
    assert token is not None
    assert SECRET.hex() not in token
    assert SECRET.decode() not in token
    assert call_token(b"") is None


@pytest.mark.parametrize("presented", [None, "", "0" * 64, b"\xff\xfe", "x"])
def test_only_the_deployments_token_matches(presented: object) -> None:
    assert token_matches(call_token(SECRET), SECRET)
    assert token_matches(call_token(SECRET).encode(), SECRET)
    assert not token_matches(presented, SECRET)
    assert token_matches(presented, b"")  # no secret: nothing is checked


def test_a_record_with_adapters_is_signed_v2_which_covers_them() -> None:
    with_adapters = dataclasses.replace(INFO, adapters=("sql", "support"))
    signed = sign_record(with_adapters, SECRET)
    assert signed.signature.startswith("v2:")
    assert record_verified(signed, SECRET)
    for adapters in [("sql",), ("sql", "support", "zz"), ()]:
        assert not record_verified(dataclasses.replace(signed, adapters=adapters), SECRET)


def test_a_v1_record_that_lists_adapters_is_refused() -> None:
    """v1 does not cover adapters: someone who can write Redis must not add them to a genuine record."""
    signed = sign_record(INFO, SECRET)
    assert not record_verified(dataclasses.replace(signed, adapters=("injected",)), SECRET)


@pytest.mark.parametrize("adapters", [("",), ("a:b",), ("b", "a"), ("a", "a"), (" a",), ("x" * 129,)])
def test_malformed_adapter_lists_are_refused(adapters: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="adapter"):
        dataclasses.replace(INFO, adapters=adapters)


def test_loadable_adapters_are_signed_v2_and_a_v1_record_listing_them_is_refused() -> None:
    signed = sign_record(dataclasses.replace(INFO, loadable_adapters=("sql",)), SECRET)
    assert signed.signature.startswith("v2:")
    assert record_verified(signed, SECRET)
    assert not record_verified(dataclasses.replace(signed, loadable_adapters=("sql", "x")), SECRET)
    assert not record_verified(
        dataclasses.replace(sign_record(INFO, SECRET), loadable_adapters=("x",)), SECRET
    )
    with pytest.raises(ValueError, match="either held or loadable"):
        dataclasses.replace(INFO, adapters=("a",), loadable_adapters=("a",))
