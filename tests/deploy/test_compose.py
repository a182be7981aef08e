"""deploy/compose.yaml: one image for kvgate and Ray, healthchecks and start order, the shared secret,
named volumes, and ports that agree with the defaults, the Dockerfile and Prometheus."""

from __future__ import annotations

import re
from pathlib import Path

from tests.deploy import planned
from tests.deploy.command_lines import redis_start
from tests.deploy.files import DEPLOY, all_invocations, compose, document, version

KVGATE_SERVICES = {"ray-head", "ray-worker", "kvgate-workers", "gateway"}


def _services() -> dict:
    return compose()["services"]


def _invocation(service: str, command: str):
    (found,) = [
        i for i in all_invocations() if i.source == f"compose service {service}" and i.command == command
    ]
    return found


def test_the_stack_has_every_part() -> None:
    assert set(_services()) == KVGATE_SERVICES | {"redis", "prometheus"}
    assert "version" not in compose(), "the top-level `version` key is obsolete"


def test_kvgate_and_ray_share_one_image_built_from_the_cpu_dockerfile() -> None:
    specs = [_services()[name] for name in KVGATE_SERVICES]
    assert {s["image"] for s in specs} == {f"kvgate:{version()}-cpu"}
    assert all(s["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile.cpu"} for s in specs)
    assert (DEPLOY / specs[0]["build"]["context"] / specs[0]["build"]["dockerfile"]).is_file()


def test_every_service_has_a_healthcheck() -> None:
    for name, spec in _services().items():
        assert spec.get("healthcheck", {}).get("test"), name


def test_depends_on_names_real_services_and_waits_for_health() -> None:
    services = _services()
    for name, spec in services.items():
        for dependency, rule in spec.get("depends_on", {}).items():
            assert dependency in services, f"{name} -> {dependency}"
            assert rule["condition"] in ("service_healthy", "service_started")
    # the start order that matters
    assert services["ray-worker"]["depends_on"]["ray-head"]["condition"] == "service_healthy"
    for dependency in ("redis", "ray-head", "ray-worker"):
        assert services["kvgate-workers"]["depends_on"][dependency]["condition"] == "service_healthy"
    assert services["gateway"]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_every_kvgate_service_shares_the_hash_secret_and_the_redis_url() -> None:
    envs = [_services()[name]["environment"] for name in KVGATE_SERVICES]
    secrets = {env["KVGATE_HASH_SECRET"] for env in envs}
    assert len(secrets) == 1
    assert secrets.pop().startswith("${KVGATE_HASH_SECRET:?"), "compose must refuse to start without it"
    assert len({env["KVGATE_REDIS_URL"] for env in envs}) == 1


def test_workers_and_gateway_use_the_stack_redis_through_their_environment() -> None:
    """`--redis-url` defaults to $KVGATE_REDIS_URL: the URL (with the password) is in the environment of
    every kvgate service, and on no command line (gateway args, workers driver, index healthcheck)."""
    url = _services()["gateway"]["environment"]["KVGATE_REDIS_URL"]
    match = re.fullmatch(rf"redis://:(\$\{{REDIS_PASSWORD:-[\w-]+\}})@redis:{planned.REDIS_PORT}/0", url)
    assert match
    assert _services()["redis"]["environment"]["REDIS_PASSWORD"] == match.group(1), "the same default"
    calls = [
        _invocation("gateway", "gateway"),
        _invocation("kvgate-workers", "workers"),
        _invocation("kvgate-workers", "index"),
    ]
    for call in calls:
        assert "--redis-url" not in call.flags, f"{call.source}: kvgate {call.command}"
        assert _services()[call.source.split()[-1]]["environment"]["KVGATE_REDIS_URL"] == url
    for name in KVGATE_SERVICES:
        spec = _services()[name]
        assert "REDIS" not in str([spec.get("entrypoint"), spec["command"], spec["healthcheck"]]), name


def test_redis_reads_its_password_from_stdin_and_keeps_its_options() -> None:
    redis = _services()["redis"]
    assert redis["image"].startswith("redis:7")
    shell, flag, script = redis["command"]
    assert (shell, flag) == ("sh", "-c")
    start = redis_start(script)
    assert start.argv[:2] == ["redis-server", "-"]
    assert start.config == "requirepass $$REDIS_PASSWORD", "a here-document, $$ escaped for compose"
    assert start.exec_, "exec: redis-server is the container's main process and gets its SIGTERM"
    assert start.options() == {
        "--save": ["60", "1000"],
        "--appendonly": ["no"],
        "--maxmemory": ["512mb"],
        "--maxmemory-policy": ["volatile-lru"],
    }
    shell, check = redis["healthcheck"]["test"]
    assert shell == "CMD-SHELL"
    assert check.startswith('REDISCLI_AUTH="$$REDIS_PASSWORD" redis-cli ping ')


def test_named_volumes_are_declared_and_used() -> None:
    declared = set(compose()["volumes"])
    used = {
        v.split(":")[0]
        for spec in _services().values()
        for v in spec.get("volumes", [])
        if not v.startswith(".")
    }
    assert used == declared == {"redis-data", "prometheus-data"}


def test_gateway_ports_are_the_defaults_and_published_on_loopback_only() -> None:
    gateway = _invocation("gateway", "gateway")
    assert int(gateway.value("--port")) == planned.HTTP_PORT
    assert int(gateway.value("--grpc-port")) == planned.GRPC_PORT
    assert gateway.value("--host") == "0.0.0.0"
    assert _services()["gateway"]["ports"] == [
        f"127.0.0.1:{planned.HTTP_PORT}:{planned.HTTP_PORT}",
        f"127.0.0.1:{planned.GRPC_PORT}:{planned.GRPC_PORT}",
    ]
    health = " ".join(_services()["gateway"]["healthcheck"]["test"])
    assert f"http://127.0.0.1:{planned.HTTP_PORT}{planned.HEALTH_PATH}" in health


def test_nothing_is_published_beyond_loopback() -> None:
    for name, spec in _services().items():
        for port in spec.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port}"
    assert "ports" not in _services()["redis"]


def test_ray_nodes_join_the_head_on_the_gcs_port() -> None:
    services = _services()
    head = services["ray-head"]["command"]
    assert services["ray-head"]["entrypoint"] == ["ray"]
    assert head[:2] == ["start", "--head"]
    assert f"--port={planned.RAY_GCS_PORT}" in head
    assert "--num-cpus=0" in head, "no kvgate worker may land on the head"
    assert f"--address=ray-head:{planned.RAY_GCS_PORT}" in services["ray-worker"]["command"]
    driver = services["kvgate-workers"]["command"][0]
    assert f"ray start --address=ray-head:{planned.RAY_GCS_PORT} --num-cpus=0" in driver
    driver_call = _invocation("kvgate-workers", "workers")
    assert driver_call.value("--ray-address") == f"ray-head:{planned.RAY_GCS_PORT}"
    for name in ("ray-head", "ray-worker"):
        assert f"--metrics-export-port={planned.RAY_METRICS_PORT}" in services[name]["command"]


def test_worker_count_fits_the_ray_worker_and_matches_prometheus_targets() -> None:
    workers = int(_invocation("kvgate-workers", "workers").value("--workers"))
    cpus = next(a for a in _services()["ray-worker"]["command"] if a.startswith("--num-cpus="))
    assert int(cpus.partition("=")[2]) >= workers
    (group,) = document(DEPLOY / "prometheus" / "targets" / "workers.yml")
    assert group["targets"] == [f"ray-worker:{planned.WORKER_METRICS_BASE + i}" for i in range(workers)]


def test_workers_healthcheck_reads_the_index_command_output() -> None:
    """The healthcheck greps `kvgate index`'s last line ("N live worker(s)")."""
    from kvgate.cli import index_cmd

    test = _services()["kvgate-workers"]["healthcheck"]["test"]
    assert "live worker" in test[1]
    assert 'live worker(s)"' in Path(index_cmd.__file__).read_text()


def test_prometheus_mounts_the_shipped_config() -> None:
    prometheus = _services()["prometheus"]
    assert "./prometheus:/etc/prometheus:ro" in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    assert (DEPLOY / "prometheus" / "prometheus.yml").is_file()
