"""The config fingerprint that workers advertise and gateways check."""

from __future__ import annotations

import dataclasses

import pytest

from kvgate.proto.layout import CacheLayout

BASE = CacheLayout(
    model_id="HuggingFaceTB/SmolLM2-135M-Instruct", secret=b"s3cret", chunk_size=128, block_size=16
)


def test_equal_configs_have_equal_fingerprints() -> None:
    twin = CacheLayout(model_id=BASE.model_id, secret=b"s3cret", chunk_size=128, block_size=16)
    assert twin.fingerprint() == BASE.fingerprint()
    assert len(BASE.fingerprint()) == 32


@pytest.mark.parametrize(
    "change",
    [{"model_id": "other"}, {"secret": b""}, {"chunk_size": 256}, {"block_size": 32}],
)
def test_every_field_changes_the_fingerprint(change: dict) -> None:
    assert dataclasses.replace(BASE, **change).fingerprint() != BASE.fingerprint()


def test_the_fingerprint_reveals_nothing_of_the_secret_but_its_presence() -> None:
    """Two secrets give one fingerprint: nothing to brute-force the secret against (deployments with
    different secrets tell each other apart by their records' signatures, tests/proto/test_trust.py)."""
    assert dataclasses.replace(BASE, secret=b"x" * 64).fingerprint() == BASE.fingerprint()
    assert BASE.root().secret == b"s3cret"


def test_root_carries_the_request_fields() -> None:
    root = BASE.root(adapter_id="lora", cache_salt="tenant")
    assert (root.model_id, root.adapter_id, root.cache_salt) == (BASE.model_id, "lora", "tenant")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model_id": ""}, "model_id"),
        ({"model_id": "m", "chunk_size": 100, "block_size": 16}, "multiple"),
        ({"model_id": "m", "block_size": 0}, "positive"),
    ],
)
def test_invalid_configs_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CacheLayout(**kwargs)


@pytest.mark.parametrize("bad", ["", "~worker", "has space", "x" * 129, "tab\tbed"])
def test_worker_ids_that_would_break_the_index_are_refused(bad: str) -> None:
    from kvgate.proto.ids import Epoch, WorkerId
    from kvgate.proto.workers import WorkerInfo

    with pytest.raises(ValueError, match="worker id"):
        WorkerInfo(WorkerId(bad), Epoch(1), "127.0.0.1:1", "f" * 32, "m")
