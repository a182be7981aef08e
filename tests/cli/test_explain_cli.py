"""``kvgate explain`` against a running gateway (the CLI as a subprocess)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import httpx

from tests.gateway.test_openai_api import LONG_SYSTEM
from tests.support.live_gateway import MODEL, LiveGateway


async def kvgate(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kvgate.cli.main",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    return proc.returncode, out.decode(), err.decode()


async def test_explain_shows_the_cache_hit_of_a_warm_prompt(live: LiveGateway, tmp_path: Path) -> None:
    messages = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "hi"}]
    async with httpx.AsyncClient(base_url=live.url) as http:
        await http.post("/v1/chat/completions", json={"model": MODEL, "messages": messages, "max_tokens": 2})
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(messages))

    code, out, err = await kvgate("explain", "--url", live.url, "--model", MODEL, "--messages", str(path))
    raw_code, raw, _ = await kvgate(
        "explain", "--url", live.url, "--model", MODEL, "--messages", str(path), "--json"
    )

    assert code == 0, err
    assert raw_code == 0
    answer = json.loads(raw)
    assert answer["reason"] == "cache_hit"
    assert f"chosen: {answer['chosen_worker']}  reason: cache_hit" in out
    assert f"{answer['full_chunks']} full chunks" in out


async def test_explain_reports_errors_and_unreachable_gateways(live: LiveGateway) -> None:
    code, _, err = await kvgate("explain", "--url", live.url, "--model", "nope", "--prompt", "x")
    assert code == 1
    assert "404" in err
    code, _, err = await kvgate("explain", "--url", "http://127.0.0.1:1", "--model", MODEL, "--prompt", "x")
    assert code == 1
    assert "cannot reach" in err
