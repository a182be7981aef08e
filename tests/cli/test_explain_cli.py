"""``kvgate explain`` against a running gateway (the CLI as a subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import httpx

from kvgate.cli.api_key import API_KEY_ENV
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.routing.home import home_worker
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from kvgate.proto.ids import WorkerId
from tests.gateway.test_openai_api import LONG_SYSTEM
from tests.support.live_gateway import MODEL, LiveGateway, grpc_front, running_gateway


async def kvgate(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kvgate.cli.main",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != API_KEY_ENV} | (env or {}),
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


async def test_explain_sends_the_api_key_from_the_environment_or_a_file(
    tokenizer: Tokenizer, tmp_path: Path
) -> None:
    key = "kvg-explain-test-key"
    ring = KeyRing([(hash_key(key), Tenant("acme"))])
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    args = ("explain", "--model", MODEL, "--prompt", "hello")
    async with running_gateway(tokenizer, keys=ring) as gateway:
        without = await kvgate(*args, "--url", gateway.url)
        from_env = await kvgate(*args, "--url", gateway.url, env={API_KEY_ENV: key})
        from_file = await kvgate(*args, "--url", gateway.url, "--api-key-file", str(key_file))
        wrong = await kvgate(*args, "--url", gateway.url, env={API_KEY_ENV: "kvg-wrong"})
    assert without[0] == 1
    assert "401" in without[2]
    assert from_env[0] == 0, from_env[2]
    assert from_file[0] == 0, from_file[2]
    assert "chosen:" in from_file[1]
    assert wrong[0] == 1
    assert "401" in wrong[2]


async def test_explain_over_grpc_agrees_with_http_and_sends_the_key(
    tokenizer: Tokenizer, tmp_path: Path
) -> None:
    """``--grpc``: the same decision through the gRPC front (via kvgate.client), the key as metadata."""
    key = "kvg-explain-grpc-key"
    ring = KeyRing([(hash_key(key), Tenant("acme"))])
    messages = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "hi"}]
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(messages))
    async with running_gateway(tokenizer, keys=ring) as gateway, grpc_front(gateway) as target:
        async with httpx.AsyncClient(
            base_url=gateway.url, headers={"authorization": f"Bearer {key}"}
        ) as http:
            body = {"model": MODEL, "messages": messages, "max_tokens": 2}
            assert (await http.post("/v1/chat/completions", json=body)).status_code == 200
        args = ("explain", "--model", MODEL, "--messages", str(path), "--json")
        over_http = await kvgate(*args, "--url", gateway.url, env={API_KEY_ENV: key})
        over_grpc = await kvgate(*args, "--grpc", target, env={API_KEY_ENV: key})
        shown = await kvgate(*args[:-1], "--grpc", target, env={API_KEY_ENV: key})
        refused = await kvgate(*args, "--grpc", target)
    assert over_http[0] == over_grpc[0] == 0, over_grpc[2]
    http_answer, grpc_answer = json.loads(over_http[1]), json.loads(over_grpc[1])
    for field in (
        "chosen_worker",
        "reason",
        "prompt_tokens",
        "full_chunks",
        "predicted_cached_tokens",
        "matches",
    ):
        assert grpc_answer[field] == http_answer[field], field
    assert grpc_answer["reason"] == "cache_hit"
    assert f"chosen: {grpc_answer['chosen_worker']}  reason: cache_hit" in shown[1]
    assert refused[0] == 1
    assert "UNAUTHENTICATED" in refused[2]


async def test_explain_prompt_of_a_cached_chat_hints_at_messages(live: LiveGateway, tmp_path: Path) -> None:
    """The chat is cached as its template renders it: its text as a --prompt matches nothing, and the
    answer says to use --messages (which finds the hit)."""
    messages = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "hi"}]
    async with httpx.AsyncClient(base_url=live.url) as http:
        await http.post("/v1/chat/completions", json={"model": MODEL, "messages": messages, "max_tokens": 2})
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(messages))

    code, as_prompt, err = await kvgate(
        "explain", "--url", live.url, "--model", MODEL, "--prompt", LONG_SYSTEM
    )
    _, as_chat, _ = await kvgate("explain", "--url", live.url, "--model", MODEL, "--messages", str(path))

    assert code == 0, err
    assert "(no worker holds any chunk of this prompt)" in as_prompt
    assert "hint:" in as_prompt
    assert "--messages FILE" in as_prompt
    assert "reason: cache_hit" in as_chat
    assert "hint:" not in as_chat


async def test_explain_with_a_prompt_cache_key_names_its_home(tokenizer: Tokenizer) -> None:
    """``--prompt-cache-key``: a prompt no worker holds is predicted at the key's home, reason
    ``pinned``, by /v1/route and by gRPC ``Route`` alike (docs/CACHING.md, "prompt_cache_key")."""
    prompt = f"{uuid.uuid4().hex} " + "Explain prefix caching in one line. " * 30
    async with running_gateway(tokenizer) as gateway, grpc_front(gateway) as target:
        ids = [WorkerId(w.worker_id) for w in gateway.workers]
        key = next(k for k in (f"customer-{i}" for i in range(6)) if home_worker(k, ids) == ids[-1])
        args = ("explain", "--model", MODEL, "--prompt", prompt, "--prompt-cache-key", key, "--json")
        answers = [await kvgate(*args, "--url", gateway.url), await kvgate(*args, "--grpc", target)]
    for code, out, err in answers:
        assert code == 0, err
        assert (json.loads(out)["chosen_worker"], json.loads(out)["reason"]) == (ids[-1], "pinned")
