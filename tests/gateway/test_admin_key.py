"""The operators' endpoints behind an admin key: refused without it (401, inviting HTTP Basic),
served with it as a bearer token or a Basic password; /health and the API are not affected."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import httpx
import pytest

from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.http_api.admin import admin_ring
from kvgate.gateway.tenancy import hash_key
from tests.support.live_gateway import MODEL, LiveGateway, running_gateway

ADMIN_KEY = "kvg-admin-key-for-the-tests"
GUARDED = ["/metrics", "/dashboard", "/dashboard/data", "/docs", "/redoc", "/openapi.json"]


@pytest.fixture
async def guarded(tokenizer: Tokenizer) -> AsyncIterator[LiveGateway]:
    keys = admin_ring(f"{hash_key('kvg-another-admin')}, {hash_key(ADMIN_KEY)}")
    async with running_gateway(tokenizer, admin_keys=keys) as gateway:
        yield gateway


def basic(password: str) -> str:
    return "Basic " + base64.b64encode(f"ops:{password}".encode()).decode()


@pytest.mark.parametrize("path", GUARDED)
async def test_operators_endpoints_need_the_admin_key(guarded: LiveGateway, path: str) -> None:
    async with httpx.AsyncClient(base_url=guarded.url, timeout=10) as http:
        for headers in ({}, {"authorization": "Bearer kvg-wrong"}, {"authorization": basic("kvg-wrong")},
                        {"authorization": "Basic !!not-base64"}):  # fmt: skip
            refused = await http.get(path, headers=headers)
            assert refused.status_code == 401, (path, headers)
            assert refused.json()["error"]["code"] == "admin_key_required"
            assert refused.headers["www-authenticate"].startswith("Basic")
        for auth in (f"Bearer {ADMIN_KEY}", basic(ADMIN_KEY)):
            assert (await http.get(path, headers={"authorization": auth})).status_code == 200, path


async def test_health_and_the_api_need_no_admin_key(guarded: LiveGateway) -> None:
    async with httpx.AsyncClient(base_url=guarded.url, timeout=10) as http:
        assert (await http.get("/health")).status_code == 200
        assert (await http.get("/v1/models")).status_code == 200
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert (await http.post("/v1/chat/completions", json=chat)).status_code == 200


def test_without_admin_keys_nothing_is_guarded() -> None:
    assert admin_ring(None) is None
    assert admin_ring(" , ") is None
    with pytest.raises(ValueError, match="hash"):
        admin_ring("kvg-a-plain-key")
