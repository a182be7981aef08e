"""``kvgate up`` with LoRA adapters: a private Ray instance, two worker actors on the tiny model, one
``peft`` adapter placed on each (``--lora ID=PATH@I``). A request for ``tiny:ID`` is served by the
worker holding that adapter, and its greedy output equals ``peft`` + ``transformers``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from kvgate.common.tokenizer import load_tokenizer
from tests.support.lora_adapters import greedy_text, make_adapters
from tests.system.test_up import TINY, chat
from tests.system.up_process import READY_S, UpProcess

pytestmark = [pytest.mark.slow, pytest.mark.ray]

ADAPTERS = {"sql": 1, "support": 2}  # id -> seed; sql on worker-0, support on worker-1


@pytest.fixture
def lora_up(tiny_chat_model: Path, tmp_path: Path) -> Iterator[tuple[UpProcess, dict[str, Any]]]:
    references = make_adapters(tiny_chat_model, tmp_path, ADAPTERS)
    placed = [flag for i, name in enumerate(ADAPTERS) for flag in ("--lora", f"{name}={tmp_path / name}@{i}")]
    process = UpProcess(["--model", str(tiny_chat_model), "--model-name", "tiny", *TINY, *placed])
    try:
        yield process, references
    finally:
        if process.proc.poll() is None:
            process.kill()


def test_each_adapter_is_served_by_the_worker_holding_it(
    lora_up: tuple[UpProcess, dict[str, Any]], tiny_chat_model: Path
) -> None:
    up, references = lora_up
    up.wait_healthy(timeout_s=READY_S)
    client = openai.OpenAI(base_url=f"{up.base_url}/v1", api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["tiny", "tiny:sql", "tiny:support"]
    tokenizer = load_tokenizer(tiny_chat_model)
    messages = chat("Which tables are there?")
    for i, name in enumerate(ADAPTERS):
        reply = client.chat.completions.create(
            model=f"tiny:{name}", messages=messages, max_tokens=6, temperature=0
        )
        assert reply.model_extra["kvgate"]["worker"] == f"worker-{i}"
        assert reply.choices[0].message.content == greedy_text(references[name], tokenizer, messages, 6)
    assert up.interrupt() == 0, up.log()
