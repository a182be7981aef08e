"""``kvgate diagnose`` against a running gateway (the CLI as a subprocess): the diagnosis of the caller's
own request, and a refusal for another tenant's."""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from kvgate.cli import diagnose_cmd
from kvgate.cli.api_key import API_KEY_ENV
from kvgate.common.tokenizer import Tokenizer
from kvgate.gateway.tenancy import KeyRing, Tenant, hash_key
from tests.cli.test_explain_cli import kvgate
from tests.gateway.test_openai_api import LONG_SYSTEM
from tests.support.live_gateway import MODEL, running_gateway

KEYS = {"acme": "kvg-acme-key", "beta": "kvg-beta-key"}
RING = KeyRing([(hash_key(key), Tenant(name)) for name, key in KEYS.items()])


async def test_diagnose_tells_the_cause_of_ones_own_request_only(tokenizer: Tokenizer) -> None:
    messages = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": "hi"}]
    async with running_gateway(tokenizer, keys=RING) as live:
        headers = {"authorization": f"Bearer {KEYS['acme']}"}
        async with httpx.AsyncClient(base_url=live.url, headers=headers) as http:
            body = {"model": MODEL, "messages": messages, "max_tokens": 2}
            request_id = (await http.post("/v1/chat/completions", json=body)).headers["x-request-id"]
        code, out, _ = await kvgate(
            "diagnose", request_id, "--url", live.url, env={API_KEY_ENV: KEYS["acme"]}
        )
        assert code == 0
        assert f"request {request_id}: 0 of " in out
        assert "cause: new_prefix" in out
        code, out, _ = await kvgate(
            "diagnose", request_id, "--url", live.url, "--json", env={API_KEY_ENV: KEYS["acme"]}
        )
        assert (code, json.loads(out)["cause"]) == (0, "new_prefix")
        code, out, err = await kvgate(
            "diagnose", request_id, "--url", live.url, env={API_KEY_ENV: KEYS["beta"]}
        )
        assert (code, out) == (1, "")
        assert "404" in err


class _Proxy(BaseHTTPRequestHandler):
    """What sits in front of a gateway at times: answers an HTML page, with the status in the path."""

    def do_GET(self) -> None:
        status = 200 if "/ok-" in self.path else 502
        body = b"<html><body>Bad Gateway</body></html>"
        self.send_response(status)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_an_answer_that_is_not_a_diagnosis_is_reported_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for request_id, expected in (("bad-1", "502: <html>"), ("ok-1", "no diagnosis in the answer")):
            args = argparse.Namespace(request_id=request_id, url=url, json=False, api_key_file=None)
            assert diagnose_cmd.run(args) == 1
            assert expected in capsys.readouterr().err
    finally:
        server.shutdown()
        server.server_close()
