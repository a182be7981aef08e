"""Where the Triton kernel tests can run in this process, and a fresh-interpreter fallback where not.

``TRITON_INTERPRET`` is read when a function is decorated with ``triton.jit``, and triton's own library
functions (``tl.max``, ``tl.sum``, ...) are decorated when triton is imported. So if some earlier test
imported triton (``torch._dynamo`` does) before the kernel tests' conftest set the flag, interpreted
kernels cannot run in this process: the tests that need them then run once, together, in a fresh
``python -m pytest`` with the flag set, and each reports the outcome it had there.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
import torch


def interprets_in_process() -> bool:
    """False when triton was imported before ``TRITON_INTERPRET=1`` was set."""
    if "triton" not in sys.modules:
        return True
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.max, InterpretedFunction)


def interpreter_problem() -> str | None:
    """Why the interpreter cannot run the kernels' dynamic loops here, or None (triton < 3.7 turns a loop
    bound into an int in a way numpy >= 2.3 rejects)."""
    import triton
    import triton.language as tl

    @triton.jit
    def count_up(out_ptr, n_ptr):
        for i in range(0, tl.load(n_ptr)):
            tl.store(out_ptr + i, i)

    out = torch.zeros(3, dtype=torch.int32)
    try:
        count_up[(1,)](out, torch.tensor([3], dtype=torch.int32))
    except Exception as exc:
        return f"triton {triton.__version__}'s interpreter fails a dynamic loop ({exc!r}); use triton >= 3.7"
    return None if out.tolist() == [0, 1, 2] else "the interpreter computed a wrong loop"


def delegate_to_subprocess(items: list[pytest.Item], root: Path) -> None:
    """Make each item report the outcome it gets in one shared fresh-interpreter run of all of them."""
    outcomes = functools.cache(lambda: _run_fresh([item.nodeid for item in items], root))
    for item in items:
        item.runtest = _replay(item.nodeid, outcomes)  # type: ignore[method-assign]


def _replay(nodeid: str, outcomes: Callable[[], dict[str, str]]) -> Callable[[], None]:
    def runtest() -> None:
        outcome = outcomes().get(nodeid, "failed: no result from the fresh-interpreter run")
        if outcome.startswith("skipped"):
            pytest.skip(f"in a fresh interpreter: {outcome}")
        if outcome != "passed":
            pytest.fail(
                f"in a fresh interpreter (triton was imported before TRITON_INTERPRET=1): {outcome}",
                pytrace=False,
            )

    return runtest


def _run_fresh(nodeids: list[str], root: Path) -> dict[str, str]:
    """Run ``nodeids`` in ``python -m pytest`` with ``TRITON_INTERPRET=1``: nodeid -> outcome text."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        run = subprocess.run(
            [*command, *nodeids], cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False
        )
        if not report.exists():
            failure = f"failed: pytest exited {run.returncode}: {run.stdout[-2000:]}"
            return dict.fromkeys(nodeids, failure)
        return _outcomes(ET.parse(report))


def _outcomes(report: ET.ElementTree) -> dict[str, str]:
    results = {}
    for case in report.iter("testcase"):
        nodeid = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "")
        problem = next(iter(case), None)
        if problem is None or problem.tag in ("system-out", "system-err"):
            results[nodeid] = "passed"
        else:
            verdict = "skipped" if problem.tag == "skipped" else "failed"
            results[nodeid] = f"{verdict}: {problem.get('message', '')}\n{problem.text or ''}"[:4000]
    return results
