"""Decoding worker records: unknown fields ignored (rolling upgrades), anything else that does not make
a valid record is a RecordError, never a crash or a record of wrong types."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kvgate.index.codec import RecordError, decode_info, decode_load, encode_info, encode_load
from kvgate.proto.workers import WorkerLoad
from tests.index.helpers import LOAD, A, info


def test_round_trip_and_unknown_fields() -> None:
    assert decode_info(encode_info(info(A))) == info(A)
    assert decode_load(encode_load(LOAD)) == LOAD
    newer = {**json.loads(encode_info(info(A))), "zone": "b"}
    assert decode_info(json.dumps(newer)) == info(A)
    assert decode_load(json.dumps({"running_seqs": 2, "future_metric": 9})) == WorkerLoad(running_seqs=2)
    assert decode_load(None) == decode_load("") == WorkerLoad()


def test_adapters_round_trip_and_older_records_have_none() -> None:
    with_adapters = dataclasses.replace(info(A), adapters=("sql", "support"), loadable_adapters=("x",))
    assert decode_info(encode_info(with_adapters)) == with_adapters
    older = {k: v for k, v in json.loads(encode_info(info(A))).items() if k != "adapters"}
    assert decode_info(json.dumps(older)).adapters == ()


def test_an_epoch_stored_as_digits_still_decodes() -> None:
    fields = {**json.loads(encode_info(info(A))), "epoch": "7"}
    assert decode_info(json.dumps(fields)).epoch == 7


GOOD = json.loads(encode_info(info(A)))


@pytest.mark.parametrize(
    "raw",
    [
        "{not json",
        "[1, 2]",
        '"a string"',
        "[" * 100_000,  # deeper than the parser goes
        json.dumps({k: v for k, v in GOOD.items() if k != "address"}),
        json.dumps({**GOOD, "address": 5}),
        json.dumps({**GOOD, "epoch": True}),
        json.dumps({**GOOD, "epoch": -1}),
        json.dumps({**GOOD, "worker_id": "has space"}),
        json.dumps({**GOOD, "adapters": "sql"}),
        json.dumps({**GOOD, "adapters": [1]}),
        json.dumps({**GOOD, "adapters": ["b", "a"]}),
        json.dumps({**GOOD, "adapters": ["a:b"]}),
        json.dumps({**GOOD, "adapters": [f"a{i}" for i in range(300)]}),
        json.dumps({**GOOD, "loadable_adapters": [None]}),
        json.dumps({**GOOD, "adapters": ["a"], "loadable_adapters": ["a"]}),
    ],
)
def test_bad_infos_are_record_errors(raw: str) -> None:
    with pytest.raises(RecordError):
        decode_info(raw)


@pytest.mark.parametrize(
    "raw", ["{", "7", json.dumps({"running_seqs": "3"}), json.dumps({"running_seqs": -1}),
            json.dumps({"gpu_blocks_free": 1.5})],
)  # fmt: skip
def test_bad_loads_are_record_errors(raw: str) -> None:
    with pytest.raises(RecordError):
        decode_load(raw)
