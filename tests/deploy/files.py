"""Readers for the files under deploy/: YAML documents, Dockerfile instructions, and the ``kvgate``
command lines written in shell strings, argument lists and the runbook's code blocks."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RUNBOOK = DEPLOY / "README.md"
KUBERAY = DEPLOY / "kuberay"
PROMETHEUS = DEPLOY / "prometheus"

_SHELL_BREAKS = {"&&", "||", "|", ";", "&", ">", ">>", "2>&1", "<"}


@cache
def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def version() -> str:
    return pyproject()["project"]["version"]


def deploy_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def yaml_files() -> list[Path]:
    return [p for p in deploy_files() if p.suffix in (".yaml", ".yml")]


@cache
def documents(path: Path) -> tuple[Any, ...]:
    """Every YAML document of ``path`` (empty ones dropped)."""
    with path.open() as f:
        return tuple(d for d in yaml.safe_load_all(f) if d is not None)


def document(path: Path) -> Any:
    (doc,) = documents(path)
    return doc


def k8s_objects() -> list[dict[str, Any]]:
    """The Kubernetes objects of deploy/kuberay/ (not the kustomization)."""
    return [
        d
        for p in sorted(KUBERAY.glob("*.yaml"))
        for d in documents(p)
        if "kind" in d and d["kind"] != "Kustomization"
    ]


def k8s_object(kind: str, name: str) -> dict[str, Any]:
    found = [o for o in k8s_objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


def compose() -> dict[str, Any]:
    return document(DEPLOY / "compose.yaml")


# ---- Dockerfiles ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    args: str  # the rest, continuation lines joined


def dockerfile(path: Path) -> list[Instruction]:
    """The instructions of a Dockerfile: comments dropped, ``\\`` continuations joined."""
    out: list[Instruction] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, args = line.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip()))
    assert not pending, f"{path}: dangling line continuation"
    return out


def exec_form(args: str) -> list[str] | None:
    """``["a", "b"]`` -> ["a", "b"]; None for the shell form."""
    return json.loads(args) if args.startswith("[") else None


def build_args(path: Path) -> dict[str, str]:
    """``ARG NAME=default`` of every stage (a name given twice must agree)."""
    found: dict[str, str] = {}
    for ins in dockerfile(path):
        if ins.keyword == "ARG" and "=" in ins.args:
            name, _, value = ins.args.partition("=")
            assert found.setdefault(name, value) == value, f"{path}: ARG {name} given two defaults"
    return found


def exposed_ports(path: Path) -> set[int]:
    ports: set[int] = set()
    for ins in dockerfile(path):
        if ins.keyword != "EXPOSE":
            continue
        for item in ins.args.split():
            first, _, last = item.split("/")[0].partition("-")
            ports.update(range(int(first), int(last or first) + 1))
    return ports


# ---- kvgate command lines ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Invocation:
    """One ``kvgate SUBCOMMAND ...`` found in ``source``."""

    source: str
    command: str
    flags: tuple[str, ...]
    args: tuple[str, ...]  # everything after the subcommand, as split

    def value(self, flag: str) -> str:
        """The value of ``flag`` (``--flag value`` or ``--flag=value``)."""
        for i, arg in enumerate(self.args):
            if arg == flag:
                return self.args[i + 1]
            if arg.startswith(flag + "="):
                return arg.partition("=")[2]
        raise KeyError(f"{self.source}: kvgate {self.command} has no {flag}")


def invocation(source: str, argv: list[str]) -> Invocation:
    """``argv`` is what follows ``kvgate``."""
    command, rest = argv[0], argv[1:]
    flags = tuple(a.partition("=")[0] for a in rest if a.startswith("--"))
    return Invocation(source, command, flags, tuple(rest))


def shell_invocations(source: str, text: str) -> Iterator[Invocation]:
    """Every ``kvgate`` command of a shell command line (one word ``kvgate``, then its arguments up to
    the next ``&&``, ``|``, redirection, ...)."""
    text = re.sub(r"\\\n", " ", text)
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        for i, word in enumerate(words):
            if word != "kvgate" or i + 1 >= len(words) or (i and words[i - 1] in ("-n", "--namespace")):
                continue
            argv = []
            for w in words[i + 1 :]:
                if w in _SHELL_BREAKS:
                    break
                argv.append(w)
            yield invocation(source, argv)


def runbook_code_blocks(language: str = "bash") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", RUNBOOK.read_text(), flags=re.DOTALL)


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def all_invocations() -> list[Invocation]:
    """Every ``kvgate`` command line written anywhere in deploy/: Dockerfile CMDs, compose commands and
    healthchecks, Kubernetes container args and the RayJob entrypoint, the cluster launcher's commands,
    and the runbook's shell blocks."""
    found: list[Invocation] = []
    for name in ("Dockerfile", "Dockerfile.cpu"):
        cmd = next(i for i in dockerfile(DEPLOY / name) if i.keyword == "CMD")
        found.append(invocation(f"deploy/{name} CMD", exec_form(cmd.args) or []))
    for service, spec in compose()["services"].items():
        command = spec.get("command")
        source = f"compose service {service}"
        if (
            isinstance(command, list)
            and spec.get("entrypoint") is None
            and spec.get("image", "").startswith("kvgate:")
        ):
            found.append(invocation(source, command))
        else:
            for text in _strings({"command": command, "healthcheck": spec.get("healthcheck")}):
                found.extend(shell_invocations(source, text))
    for obj in k8s_objects():
        source = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] == "Deployment":
            for container in obj["spec"]["template"]["spec"]["containers"]:
                if container["image"].startswith("kvgate:") and "command" not in container:
                    found.append(invocation(source, container["args"]))
        else:
            for text in _strings(obj.get("spec", {})):
                found.extend(shell_invocations(source, text))
    for text in _strings(document(DEPLOY / "ray" / "cluster.yaml")):
        found.extend(shell_invocations("deploy/ray/cluster.yaml", text))
    for block in runbook_code_blocks():
        found.extend(shell_invocations("deploy/README.md", block))
    return found
