"""Every process command line that the deploy files start, and the secrets written into one.

A command line is readable by every user of its host (``ps``, ``/proc/PID/cmdline``), so no secret may be
expanded into one: not the Redis password, not a Redis URL that holds it, not ``KVGATE_HASH_SECRET``.
What may carry them: the environment (``NAME=value cmd``, ``export NAME=value``, compose ``environment``,
Kubernetes ``env``) and stdin (a here-document, or the output of the shell builtin ``printf``, which is no
process of its own). Expansion happens in three places, each with its own syntax: compose interpolates
``$NAME`` / ``${NAME}`` into the whole file (``$$`` escapes a ``$`` for the container's shell), the kubelet
expands ``$(NAME)`` in ``command``, ``args`` and exec probes, and a shell expands ``$NAME`` / ``${NAME}``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.deploy.files import (
    DEPLOY,
    compose,
    dockerfile,
    document,
    exec_form,
    k8s_objects,
    runbook_code_blocks,
)

SECRETS = ("REDIS_PASSWORD", "KVGATE_HASH_SECRET", "KVGATE_REDIS_URL")
_NAMES = "|".join(SECRETS)
_SHELL_REF = re.compile(rf"\$\{{?({_NAMES})\b")  # $NAME, ${NAME}, ${NAME:-...}
_COMPOSE_REF = re.compile(rf"\$\$|\$\{{?({_NAMES})\b")  # group 1 set: compose interpolates it
_KUBELET_REF = re.compile(rf"\$\(({_NAMES})\)")
_VALUE_ARGUMENT = re.compile(rf"(?<![A-Za-z0-9_])({_NAMES})=\S")  # -e NAME=value, --from-literal=NAME=value
_URL_PASSWORD = re.compile(r"rediss?://[^\s/@]*:[^\s/@]+@")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PASSWORD_FLAGS = {"--requirepass", "--masterauth"}  # redis-server's
_REDIS_CLI_PASSWORD_FLAGS = {"-a", "--pass"}
_WRAPPERS = {"exec", "nohup", "command", "env", "sudo", "time"}  # run the next word as the program
_SHELLS = {"sh", "bash", "ash", "dash"}
_OPERATOR_CHARS = frozenset("();<>|&")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")


@dataclass(frozen=True)
class CommandLine:
    """One process start written in a deploy file: an argument vector (exec form) or a shell script."""

    source: str
    expander: str  # who expands variables before the process starts: "compose", "kubelet" or "shell"
    argv: tuple[str, ...] = ()
    script: str | None = None


@dataclass
class Scan:
    leaks: list[str] = field(default_factory=list)  # a secret on a command line
    uses: list[str] = field(default_factory=list)  # a secret passed through the environment or stdin


def tokens(line: str) -> list[str]:
    """The words and operators of one shell line (quotes removed, comments dropped)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def _is_operator(token: str) -> bool:
    return bool(token) and set(token) <= _OPERATOR_CHARS


def _split_script(script: str) -> tuple[list[list[str]], list[str]]:
    """The simple commands of a shell script, as lists of words (redirection targets left out), and the
    lines of its here-documents (stdin, not arguments)."""
    commands: list[list[str]] = []
    heredocs: list[str] = []
    end_of_heredoc = None
    for line in re.sub(r"\\\n", " ", script).splitlines():
        if end_of_heredoc is not None:
            if line.strip() == end_of_heredoc:
                end_of_heredoc = None
            else:
                heredocs.append(line)
            continue
        if match := _HEREDOC.search(line):
            end_of_heredoc = match.group(2)
        words: list[str] = []
        redirect = False
        for token in tokens(line):
            if _is_operator(token):
                if "<" in token or ">" in token:
                    redirect = True  # the next word names a file or a here-document delimiter
                    continue
                if words:
                    commands.append(words)
                words = []
            elif redirect:
                redirect = False
            else:
                words.append(token)
        if words:
            commands.append(words)
    return commands, heredocs


def _program(words: list[str]) -> str:
    """The program a command line runs: ``exec nohup env A=1 redis-cli ...`` runs redis-cli."""
    for word in words:
        if word not in _WRAPPERS and not _ASSIGNMENT.match(word):
            return Path(word).name
    return ""


def _check_argument(program: str, word: str, source: str, scan: Scan) -> None:
    """``word`` is an argument of a process running ``program``: it must hold no secret."""
    shown = f"{source}: `{program}` gets"
    if match := _SHELL_REF.search(word):
        scan.leaks.append(f"{shown} ${match.group(1)} expanded into its argument {word!r}")
    if match := _VALUE_ARGUMENT.search(word):
        scan.leaks.append(f"{shown} the value of {match.group(1)} as an argument: {word!r}")
    if _URL_PASSWORD.search(word):
        scan.leaks.append(f"{shown} a URL with a password as an argument: {word!r}")
    flag = word.partition("=")[0]
    if flag in _PASSWORD_FLAGS or (program == "redis-cli" and flag in _REDIS_CLI_PASSWORD_FLAGS):
        scan.leaks.append(f"{shown} a password flag: {word!r}")


def _check_shell_command(words: list[str], source: str, scan: Scan) -> None:
    i = 0
    while i < len(words) and _ASSIGNMENT.match(words[i]):  # NAME=value cmd: the environment of cmd
        if _SHELL_REF.search(words[i]):
            scan.uses.append(f"{source}: environment assignment {words[i]!r}")
        i += 1
    if i == len(words):
        return
    program, arguments = words[i], words[i + 1 :]
    if program in ("export", "readonly"):  # builtins: their assignments set the shell's environment
        for word in arguments:
            if _ASSIGNMENT.match(word) or _IDENTIFIER.fullmatch(word):
                if _SHELL_REF.search(word):
                    scan.uses.append(f"{source}: {program} {word!r}")
            else:
                _check_argument(program, word, source, scan)
        return
    if program == "printf":  # a builtin of every shell used here: its arguments are no process's
        if any(_SHELL_REF.search(word) for word in arguments):
            scan.uses.append(f"{source}: printf {' '.join(arguments)!r} (the shell's builtin)")
        return
    for word in words[i:]:
        _check_argument(_program(words[i:]), word, source, scan)


def _check_shell(script: str, source: str, scan: Scan) -> None:
    commands, heredocs = _split_script(script)
    for words in commands:
        _check_shell_command(words, source, scan)
    scan.uses += [
        f"{source}: here-document line {line.strip()!r}" for line in heredocs if _SHELL_REF.search(line)
    ]


def scan(command: CommandLine) -> Scan:
    """The secrets ``command`` expands onto a command line (``leaks``) and passes otherwise (``uses``)."""
    result = Scan()
    parts = [*command.argv, command.script or ""]
    if command.expander == "compose":
        for part in parts:
            for match in _COMPOSE_REF.finditer(part):
                if match.group(1):
                    result.leaks.append(
                        f"{command.source}: compose interpolates {match.group(0)} into {part!r}"
                    )
        argv = [a.replace("$$", "$") for a in command.argv]
        script = command.script.replace("$$", "$") if command.script is not None else None
    else:
        argv, script = list(command.argv), command.script
    if command.expander == "kubelet":
        for part in parts:
            for match in _KUBELET_REF.finditer(part):
                result.leaks.append(f"{command.source}: the kubelet expands {match.group(0)} into {part!r}")
    if argv and Path(argv[0]).name in _SHELLS:
        flag = next((i for i, a in enumerate(argv[1:], 1) if re.fullmatch(r"-[a-z]*c[a-z]*", a)), None)
        if flag is not None and flag + 1 < len(argv):
            _check_shell(argv[flag + 1], command.source, result)
            argv = argv[: flag + 1] + argv[flag + 2 :]
    for word in argv:
        _check_argument(_program(argv), word, command.source, result)
    if script is not None:
        _check_shell(script, command.source, result)
    return result


# ---- where the deploy files start processes ---------------------------------------------------------


def _compose_command_lines() -> Iterator[CommandLine]:
    for name, spec in compose()["services"].items():
        source = f"compose service {name}"
        entrypoint, command = spec.get("entrypoint"), spec.get("command")
        argv: list[str] = []
        for part in (entrypoint, command):
            argv += shlex.split(part) if isinstance(part, str) else list(part or [])
        if argv:
            yield CommandLine(f"{source}: command", "compose", argv=tuple(argv))
        test = spec.get("healthcheck", {}).get("test")
        if isinstance(test, str):
            yield CommandLine(f"{source}: healthcheck", "compose", script=test)
        elif test and test[0] == "CMD-SHELL":
            yield CommandLine(f"{source}: healthcheck", "compose", script=test[1])
        elif test and test[0] == "CMD":
            yield CommandLine(f"{source}: healthcheck", "compose", argv=tuple(test[1:]))


def _containers(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        for key in ("containers", "initContainers"):
            yield from node.get(key, [])
        for value in node.values():
            yield from _containers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _containers(value)


def _kuberay_command_lines() -> Iterator[CommandLine]:
    for obj in k8s_objects():
        owner = f"{obj['kind']}/{obj['metadata']['name']}"
        for container in _containers(obj.get("spec", {})):
            source = f"{owner} container {container['name']}"
            argv = [*container.get("command", []), *container.get("args", [])]
            if argv:
                yield CommandLine(f"{source}: command", "kubelet", argv=tuple(argv))
            handlers = {
                probe: container.get(probe, {})
                for probe in ("startupProbe", "readinessProbe", "livenessProbe")
            }
            handlers.update(container.get("lifecycle", {}))
            for what, handler in handlers.items():
                if "exec" in handler:
                    yield CommandLine(f"{source}: {what}", "kubelet", argv=tuple(handler["exec"]["command"]))
        if obj["kind"] == "RayCluster":
            groups = [obj["spec"]["headGroupSpec"], *obj["spec"].get("workerGroupSpecs", [])]
            for group in groups:
                params = [f"--{key}={value}" for key, value in group.get("rayStartParams", {}).items()]
                yield CommandLine(f"{owner} rayStartParams", "kubelet", argv=("ray", "start", *params))
        if obj["kind"] == "RayJob":
            yield CommandLine(f"{owner}: entrypoint", "shell", script=obj["spec"]["entrypoint"])


def _ray_cluster_command_lines() -> Iterator[CommandLine]:
    for key, commands in document(DEPLOY / "ray" / "cluster.yaml").items():
        if key.endswith("_commands"):
            for command in commands:
                yield CommandLine(f"deploy/ray/cluster.yaml {key}", "shell", script=command)


def _dockerfile_command_lines() -> Iterator[CommandLine]:
    for name in ("Dockerfile", "Dockerfile.cpu"):
        for ins in dockerfile(DEPLOY / name):
            if ins.keyword not in ("RUN", "CMD", "ENTRYPOINT", "HEALTHCHECK"):
                continue
            args = ins.args.partition("CMD ")[2] if ins.keyword == "HEALTHCHECK" else ins.args
            source = f"deploy/{name} {ins.keyword}"
            argv = exec_form(args)
            if argv is None:
                yield CommandLine(source, "shell", script=args)
            else:
                yield CommandLine(source, "shell", argv=tuple(argv))


def manifest_command_lines() -> list[CommandLine]:
    """Every command line of deploy/: compose commands, entrypoints and healthchecks; Kubernetes container
    commands and args, exec probes and hooks, rayStartParams and the RayJob entrypoint; the cluster
    launcher's commands; the Dockerfiles' RUN, CMD, ENTRYPOINT and HEALTHCHECK; the runbook's shell
    blocks."""
    found = [
        *_compose_command_lines(),
        *_kuberay_command_lines(),
        *_ray_cluster_command_lines(),
        *_dockerfile_command_lines(),
    ]
    found += [CommandLine("deploy/README.md", "shell", script=block) for block in runbook_code_blocks()]
    return found


# ---- redis-server with its config on stdin ----------------------------------------------------------


@dataclass(frozen=True)
class RedisStart:
    argv: list[str]  # redis-server - --port ...
    config: str  # what it reads on stdin
    exec_: bool  # started with `exec` (it replaces the shell, so it gets the container's signals)

    def options(self) -> dict[str, list[str]]:
        """``--name value...`` of the command line."""
        found: dict[str, list[str]] = {}
        name = None
        for word in self.argv[2:]:
            if word.startswith("--"):
                name = word
                found[name] = []
            else:
                assert name, f"redis-server: {word!r} before any option"
                found[name].append(word)
        return found


def redis_start(script: str) -> RedisStart:
    """The ``redis-server -`` of a shell script, and its stdin: a here-document's body, or what a
    ``printf`` piped into it prints."""
    lines = re.sub(r"\\\n", " ", script).splitlines()
    for n, line in enumerate(lines):
        words = tokens(line)
        if "redis-server" not in words:
            continue
        start = words.index("redis-server")
        argv = []
        for word in words[start:]:
            if _is_operator(word):
                break
            argv.append(word)
        before, after = words[:start], words[start + len(argv) :]
        if after[:1] == ["<<"]:
            body = [line.strip() for line in lines[n + 1 :]]
            config = "\n".join(body[: body.index(after[1])])
        else:
            assert before[:1] == ["printf"], f"redis-server reads no config on stdin in {line!r}"
            assert before[-1] == "|", f"printf is not piped into redis-server in {line!r}"
            fmt, *values = before[1:-1]
            config = fmt.replace("\\n", "\n") % tuple(values)
        return RedisStart(argv, config, exec_=before[-1:] == ["exec"])
    raise AssertionError(f"no redis-server in {script!r}")
