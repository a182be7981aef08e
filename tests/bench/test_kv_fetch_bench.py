"""``bench/kv_fetch.py``'s pure parts: the rates of one prompt length from its median TTFTs, and the
Markdown table naming the commit and command (the measurement itself runs real workers: see
``tests/workers/service/test_kv_fetch_e2e.py`` for the fetch path under test)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.kv_fetch import LLAMA3_8B_BYTES_PER_TOKEN, markdown, rates

BYTES_PER_TOKEN = 46_080  # SmolLM2-135M in fp32: 2 x 30 layers x 3 KV heads x 64 x 4 bytes


def test_the_fetch_is_what_it_adds_over_a_local_hit() -> None:
    row = rates(1024, 1008, BYTES_PER_TOKEN, {"compute": 2.0, "fetch": 0.6, "local": 0.1})
    assert row["fetch_s"] == pytest.approx(0.5)
    assert row["kv_bytes"] == 1008 * BYTES_PER_TOKEN
    assert row["fetch_mb_s"] == pytest.approx(1008 * BYTES_PER_TOKEN / 0.5 / 1e6)
    assert row["fetch_tokens_s"] == pytest.approx(2016)
    assert row["fetch_llama3_8b_tokens_s"] == pytest.approx(1008 * BYTES_PER_TOKEN / 0.5 / 131_072)
    assert LLAMA3_8B_BYTES_PER_TOKEN == 32 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x K,V x bf16
    assert row["compute_tokens_s"] == pytest.approx(512)


def test_a_fetch_no_slower_than_a_local_hit_has_no_rate() -> None:
    row = rates(1024, 1008, BYTES_PER_TOKEN, {"compute": 2.0, "fetch": 0.1, "local": 0.1})
    assert row["fetch_mb_s"] is row["fetch_tokens_s"] is row["fetch_llama3_8b_tokens_s"] is None


def test_the_table_names_commit_command_and_each_length() -> None:
    machine = {"device_name": "cpu-x", "device": "cpu", "cpu_model": "cpu-x", "cores": 2, "threads": 1,
               "torch": "2", "commit": "abc1234+dirty", "command": "python bench/kv_fetch.py"}  # fmt: skip
    rows: list[dict[str, Any]] = [
        {"requested_tokens": 1024}
        | rates(1024, 1008, BYTES_PER_TOKEN, {"compute": 2.0, "fetch": 0.6, "local": 0.1}),
        {"requested_tokens": 4097}
        | rates(4095, 4080, BYTES_PER_TOKEN, {"compute": 9.0, "fetch": 0.2, "local": 0.2}),
    ]
    result = {"machine": machine, "model": "/m/SmolLM2.gguf", "dtype": "float32", "kv_dtype": "fp32",
              "kernels": "sdpa", "reps": 3, "bytes_per_token": BYTES_PER_TOKEN, "context": 4096,
              "rows": rows}  # fmt: skip
    text = markdown(result)
    assert "Commit `abc1234+dirty`; command `python bench/kv_fetch.py`." in text
    assert "| 1024 | 1008 | 46.4 | 2.0000 | 0.6000 | 0.1000 | 0.5000 | 93 | 2016 | 709 | 512 |" in text
    assert "| 4095 | 4080 | 188.0 | 9.0000 | 0.2000 | 0.2000 | 0.0000 | - | - | - | 455 |" in text
    assert "4097 tokens asked for, run as 4095: a prompt and its new token must fit" in text
    assert "1024 tokens asked for" not in text
