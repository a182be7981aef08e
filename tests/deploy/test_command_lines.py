"""No secret on a command line: every process the deploy files start gets the Redis password, the Redis URL
and ``KVGATE_HASH_SECRET`` through its environment or stdin, never as an argument (``ps`` shows those to
every user of the host; see deploy/README.md, "Security")."""

from __future__ import annotations

import pytest

from tests.deploy.command_lines import CommandLine, manifest_command_lines, scan


def test_no_secret_is_expanded_on_any_command_line() -> None:
    commands = manifest_command_lines()
    leaks = [leak for command in commands for leak in scan(command).leaks]
    assert not leaks, "\n".join(leaks)
    # the scan does see the secrets where they are used: through the environment or stdin
    using = {command.source for command in commands if scan(command).uses}
    assert using >= {
        "compose service redis: command",
        "compose service redis: healthcheck",
        "StatefulSet/kvgate-redis container redis: command",
        "StatefulSet/kvgate-redis container redis: readinessProbe",
        "deploy/ray/cluster.yaml head_start_ray_commands",
        "deploy/README.md",
    }, sorted(using)
    sources = {command.source.partition(":")[0] for command in commands}
    assert sources >= {
        "compose service gateway",
        "compose service kvgate-workers",
        "Deployment/kvgate-gateway container gateway",
        "RayJob/kvgate-workers",
        "RayCluster/kvgate rayStartParams",
        "deploy/Dockerfile CMD",
        "deploy/ray/cluster.yaml setup_commands",
    }, sorted(sources)


def _shell(script: str, expander: str = "shell") -> CommandLine:
    return CommandLine("example", expander, script=script)


def _argv(*argv: str, expander: str) -> CommandLine:
    return CommandLine("example", expander, argv=argv)


@pytest.mark.parametrize(
    "command",
    [
        _argv(
            "sh",
            "-c",
            'exec redis-server --requirepass "$$REDIS_PASSWORD" --save 60 1000',
            expander="compose",
        ),
        _argv("--requirepass", "$(REDIS_PASSWORD)", "--save", "60", "1000", expander="kubelet"),
        _argv("sh", "-c", "REDISCLI_AUTH=$(REDIS_PASSWORD) redis-cli ping", expander="kubelet"),
        _argv("gateway", "--redis-url", "$(KVGATE_REDIS_URL)", expander="kubelet"),
        _argv("gateway", "--redis-url", "redis://:${REDIS_PASSWORD:-dev}@redis:6379/0", expander="compose"),
        _shell("exec redis-server - <<EOF\nrequirepass ${REDIS_PASSWORD}\nEOF\n", expander="compose"),
        _shell('redis-cli -p 6380 -a "$REDIS_PASSWORD" --no-auth-warning ping'),
        _shell('redis-server --port 6380 --requirepass "$REDIS_PASSWORD" --daemonize yes'),
        _shell("redis-server --port 6380 --requirepass hunter2"),
        _shell('nohup kvgate workers --workers 2 --redis-url "$KVGATE_REDIS_URL" > /tmp/w.log 2>&1 &'),
        _shell("kvgate index --redis-url redis://:hunter2@10.0.0.1:6380/0 | grep -q live"),
        _shell('env REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli ping'),
        _shell('docker run -e KVGATE_HASH_SECRET="$(openssl rand -hex 32)" kvgate:0.1.0-cuda'),
        _shell("kubectl create secret generic s --from-literal=REDIS_PASSWORD=abc"),
    ],
    ids=lambda command: command.script or " ".join(command.argv),
)
def test_the_scan_finds_a_secret_on_a_command_line(command: CommandLine) -> None:
    assert scan(command).leaks


@pytest.mark.parametrize(
    "command",
    [
        _shell("exec redis-server - --save 60 1000 <<EOF\nrequirepass $$REDIS_PASSWORD\nEOF\n", "compose"),
        _argv(
            "sh", "-c", "exec redis-server - <<EOF\nrequirepass $REDIS_PASSWORD\nEOF\n", expander="kubelet"
        ),
        _shell('REDISCLI_AUTH="$$REDIS_PASSWORD" redis-cli ping | grep -q PONG', expander="compose"),
        _shell("printf 'requirepass %s\\n' \"$REDIS_PASSWORD\" | redis-server - --port 6380 --daemonize yes"),
        _shell('export KVGATE_REDIS_URL="redis://:$REDIS_PASSWORD@10.0.0.1:6380/0"'),
        _shell("kvgate gateway --host 0.0.0.0 --port 8000 --grpc-port 50051"),
        _shell("docker run -e KVGATE_HASH_SECRET kvgate:0.1.0-cuda"),
    ],
    ids=lambda command: command.script or " ".join(command.argv),
)
def test_the_scan_allows_the_environment_and_stdin(command: CommandLine) -> None:
    assert not scan(command).leaks
