"""What a benchmark result says about where and how it ran: the CPU model, cores, torch threads, library
versions, the accelerator, the checkout's commit and the command line that produced it."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    """The first ``model name`` of /proc/cpuinfo; the platform's processor string where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


RESULTS = "bench/results"
"""Where the benchmarks write: a change there alone (an earlier run's output) leaves the code as it was."""


def git_commit(short: bool = False, root: Path = ROOT) -> str:
    """``git rev-parse HEAD`` of the checkout at ``root`` (abbreviated when ``short``), with
    ``+dirty`` when tracked files outside :data:`RESULTS` have uncommitted changes (then the figures
    are not exactly that commit's); ``unknown`` outside a git checkout. Results written by an
    earlier run of a grid do not make the next run's code dirty."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    head = git("rev-parse", *(["--short"] if short else []), "HEAD")
    if not head:
        return "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", f":(exclude){RESULTS}")
    return head + ("+dirty" if changed else "")


def command_line() -> str:
    """The command that is running, as a shell would take it back: ``python -m bench.x --flag``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    program = ["-m", spec.name] if spec is not None else [sys.argv[0]]
    return shlex.join(["python", *program, *sys.argv[1:]])


def device_name(device: str) -> str:
    """The accelerator's name for a CUDA ``device``; the CPU model otherwise."""
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name(torch.device(device))
    return cpu_model()


def machine_info(device: str) -> dict[str, Any]:
    """Everything a reader needs to place a result: call it after ``torch.set_num_threads``."""
    import transformers

    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "device": device,
        "device_name": device_name(device),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "commit": git_commit(),
        "command": command_line(),
    }
