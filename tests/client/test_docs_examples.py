"""The Python examples of docs/GRPC.md, run as they are against a real gateway's gRPC front."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path

from tests.support.live_gateway import LiveGateway

DOC = Path(__file__).resolve().parents[2] / "docs" / "GRPC.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def run(code: str, grpc_target: str) -> tuple[dict, str]:
    """Executes ``code`` with the docs' ``target`` set to ``grpc_target``; its globals and what it printed."""
    namespace: dict = {"target": grpc_target, "__name__": "__docs__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(DOC), "exec"), namespace)
    return namespace, printed.getvalue()


def test_the_doc_has_its_four_examples() -> None:
    assert len(EXAMPLES) == 4


async def test_the_cached_repeat_example(grpc_target: str) -> None:
    namespace, printed = await asyncio.to_thread(run, EXAMPLES[0], grpc_target)
    assert namespace["second"].usage.cached_tokens > 0
    assert namespace["second"].route_reason == "cache_hit"
    assert "cache_hit" in printed


async def test_the_streaming_example(grpc_target: str) -> None:
    _, printed = await asyncio.to_thread(run, EXAMPLES[1], grpc_target)
    assert "length 16" in printed  # the final line: finish reason and completion tokens


async def test_the_route_example(grpc_target: str) -> None:
    namespace, _ = await asyncio.to_thread(run, EXAMPLES[2], grpc_target)
    assert namespace["decision"].chosen_worker in {"w0", "w1"}


async def test_the_generated_stubs_example(live: LiveGateway, grpc_target: str) -> None:
    for worker in live.workers:
        worker.token_delay_s = 0.05  # slow enough that the cancelled stream is still running
    _, printed = await asyncio.to_thread(run, EXAMPLES[3], grpc_target)
    count, request_id = printed.split()
    assert count == "8"
    assert len(request_id) == 32
    for _ in range(500):  # the cancelled one ends on its worker
        if any(w.cancelled for w in live.workers):
            break
        await asyncio.sleep(0.01)
    assert sum(len(w.cancelled) for w in live.workers) == 1
