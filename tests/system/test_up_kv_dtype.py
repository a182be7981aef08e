"""``kvgate up --kv-dtype int8`` / ``fp8`` for real: a private Ray instance, two worker actors on the
tiny model with quantised KV pools, the gateway in front (its cache layout names the same KV dtype), and
the official ``openai`` SDK: requests are served (so the workers' fingerprint, which names the KV dtype,
matched the gateway's), and a repeated system prompt is a cache hit."""

from __future__ import annotations

import openai
import pytest

from tests.system.test_up import TINY, chat
from tests.system.up_process import READY_S, UpProcess

pytestmark = [pytest.mark.slow, pytest.mark.ray]


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8"])
def test_up_serves_with_quantised_kv_and_reuses_it(tiny_chat_model, kv_dtype: str) -> None:
    up = UpProcess(["--model", str(tiny_chat_model), "--model-name", "tiny", *TINY, "--kv-dtype", kv_dtype])
    try:
        up.wait_healthy(timeout_s=READY_S)
        client = openai.OpenAI(base_url=f"{up.base_url}/v1", api_key="unused", max_retries=0)
        first = client.chat.completions.create(model="tiny", messages=chat("2+2?"), max_tokens=4)
        assert first.usage.completion_tokens == 4
        again = client.chat.completions.create(model="tiny", messages=chat("2+2?"), max_tokens=4)
        assert again.usage.prompt_tokens_details.cached_tokens > 0
        assert again.model_extra["kvgate"]["worker"] == first.model_extra["kvgate"]["worker"]
        assert up.interrupt() == 0, up.log()
    finally:
        if up.proc.poll() is None:
            up.kill()
