"""deploy/kuberay/: the objects and fields a GPU cluster needs, and their agreement with each other, the
images and the defaults."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any

from tests.deploy import planned
from tests.deploy.command_lines import redis_start
from tests.deploy.files import (
    DEPLOY,
    KUBERAY,
    all_invocations,
    build_args,
    dockerfile,
    document,
    k8s_object,
    k8s_objects,
    version,
)

NAMESPACE = "kvgate"
SECRET = "kvgate-secrets"


def _pod_templates() -> Iterator[tuple[str, dict[str, Any]]]:
    """(owner, pod spec) of every pod this directory creates."""
    for obj in k8s_objects():
        spec = obj.get("spec", {})
        if "template" in spec:
            yield f"{obj['kind']}/{obj['metadata']['name']}", spec["template"]["spec"]
        if obj["kind"] == "RayCluster":
            yield "RayCluster head", spec["headGroupSpec"]["template"]["spec"]
            for group in spec["workerGroupSpecs"]:
                yield f"RayCluster {group['groupName']}", group["template"]["spec"]


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["containers"][0]


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def _ports(container: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def _raycluster() -> dict[str, Any]:
    return k8s_object("RayCluster", "kvgate")


def _gpu_group() -> dict[str, Any]:
    (group,) = _raycluster()["spec"]["workerGroupSpecs"]
    return group


def test_the_required_kinds_exist() -> None:
    kinds = {(o["apiVersion"], o["kind"]) for o in k8s_objects()}
    assert kinds >= {
        ("v1", "Namespace"),
        ("v1", "Secret"),
        ("v1", "Service"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "Deployment"),
        ("ray.io/v1", "RayCluster"),
        ("ray.io/v1", "RayJob"),
    }


def test_every_object_lives_in_the_namespace() -> None:
    for obj in k8s_objects():
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]["name"]


def test_kustomization_applies_everything_but_the_secret() -> None:
    listed = document(KUBERAY / "kustomization.yaml")["resources"]
    files = {p.name for p in KUBERAY.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(listed) == files - {"secret.yaml"}


def test_raycluster_versions_and_images_match_the_dockerfiles() -> None:
    assert _raycluster()["spec"]["rayVersion"] == build_args(DEPLOY / "Dockerfile")["RAY_VERSION"]
    for owner, pod in _pod_templates():
        image = _container(pod)["image"]
        if image.startswith("kvgate:"):
            assert image in (f"kvgate:{version()}-cuda", f"kvgate:{version()}-cpu"), owner
    assert _container(_gpu_group()["template"]["spec"])["image"] == f"kvgate:{version()}-cuda"


def test_head_has_no_gpu_and_no_cpus_for_workers() -> None:
    head = _raycluster()["spec"]["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    resources = _container(head["template"]["spec"])["resources"]
    assert "nvidia.com/gpu" not in resources.get("limits", {})
    assert _ports(_container(head["template"]["spec"]))["gcs-server"] == planned.RAY_GCS_PORT


def test_gpu_workers_have_one_gpu_each_and_the_worker_ports() -> None:
    container = _container(_gpu_group()["template"]["spec"])
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["resources"]["requests"]["nvidia.com/gpu"] == 1
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    ports = _ports(container)
    assert ports["kvgate-grpc"] == planned.WORKER_GRPC_BASE
    assert ports["kvgate-metrics"] == planned.WORKER_METRICS_BASE
    assert ports["metrics"] == planned.RAY_METRICS_PORT
    assert _gpu_group()["rayStartParams"]["metrics-export-port"] == str(planned.RAY_METRICS_PORT)


def test_ray_pods_have_a_memory_backed_dev_shm() -> None:
    for owner, pod in _pod_templates():
        if owner.startswith("RayCluster"):
            volumes = {v["name"]: v for v in pod["volumes"]}
            mounts = {m["mountPath"]: m["name"] for m in _container(pod)["volumeMounts"]}
            assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory", owner


def test_every_kvgate_pod_reads_the_hash_secret_from_the_secret() -> None:
    secret = k8s_object("Secret", SECRET)
    for owner, pod in _pod_templates():
        container = _container(pod)
        if not container["image"].startswith("kvgate:"):
            continue
        env = _env(container)
        ref = env["KVGATE_HASH_SECRET"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": SECRET, "key": "KVGATE_HASH_SECRET"}, owner
        assert ref["key"] in secret["stringData"]
        assert env["KVGATE_REDIS_URL"]["value"] == _redis_url(), owner
        # $(REDIS_PASSWORD) only expands when defined earlier in the list
        names = list(env)
        assert names.index("REDIS_PASSWORD") < names.index("KVGATE_REDIS_URL"), owner


def _redis_url() -> str:
    service = k8s_object("Service", "kvgate-redis")
    (port,) = service["spec"]["ports"]
    return f"redis://:$(REDIS_PASSWORD)@{service['metadata']['name']}:{port['port']}/0"


def test_redis_is_a_password_protected_statefulset_behind_its_service() -> None:
    redis = k8s_object("StatefulSet", "kvgate-redis")
    service = k8s_object("Service", "kvgate-redis")
    assert redis["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["ports"][0]["port"] == planned.REDIS_PORT
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"].items() <= redis["spec"]["template"]["metadata"]["labels"].items()
    container = _container(redis["spec"]["template"]["spec"])
    assert container["image"].startswith("redis:7")
    assert _env(container)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == SECRET
    assert "readinessProbe" in container


def test_redis_reads_its_password_from_stdin_and_keeps_its_options() -> None:
    """Not `args: [--requirepass, $(REDIS_PASSWORD)]`: the kubelet expands that into the command line."""
    container = _container(k8s_object("StatefulSet", "kvgate-redis")["spec"]["template"]["spec"])
    assert "command" not in container, "args only: the image's entrypoint runs (umask 0077)"
    shell, flag, script = container["args"]
    assert (shell, flag) == ("sh", "-c")
    start = redis_start(script)
    assert start.argv[:2] == ["redis-server", "-"]
    assert start.config == "requirepass $REDIS_PASSWORD", "a here-document, expanded by the shell"
    assert start.exec_, "exec: redis-server is the container's main process and gets its SIGTERM"
    assert start.options() == {
        "--save": ["60", "1000"],
        "--appendonly": ["no"],
        "--maxmemory": ["1536mb"],
        "--maxmemory-policy": ["volatile-lru"],
    }
    probe = container["readinessProbe"]["exec"]["command"]
    assert probe[:2] == ["sh", "-c"]
    assert probe[2].startswith('REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli ping ')


def test_gateway_deployment_service_and_probes() -> None:
    deployment = k8s_object("Deployment", "kvgate-gateway")
    service = k8s_object("Service", "kvgate-gateway")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    container = _container(pod["spec"])
    ports = _ports(container)
    assert ports == {"http": planned.HTTP_PORT, "grpc": planned.GRPC_PORT}
    assert {(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        ("http", planned.HTTP_PORT, "http"),
        ("grpc", planned.GRPC_PORT, "grpc"),
    }
    readiness = container["readinessProbe"]["httpGet"]
    assert readiness["path"] == planned.HEALTH_PATH
    assert ports[readiness["port"]] == planned.HTTP_PORT
    assert container["livenessProbe"]["grpc"]["port"] == planned.GRPC_PORT
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(planned.HTTP_PORT)
    assert annotations["prometheus.io/path"] == planned.METRICS_PATH


def test_gateway_args_use_the_default_ports_and_the_redis_url_of_the_environment() -> None:
    (gateway,) = [i for i in all_invocations() if i.source == "Deployment/kvgate-gateway"]
    assert gateway.command == "gateway"
    assert int(gateway.value("--port")) == planned.HTTP_PORT
    assert int(gateway.value("--grpc-port")) == planned.GRPC_PORT
    # not `--redis-url $(KVGATE_REDIS_URL)`: the kubelet would expand the URL into the command line
    assert "--redis-url" not in gateway.flags
    container = _container(k8s_object("Deployment", "kvgate-gateway")["spec"]["template"]["spec"])
    assert _env(container)["KVGATE_REDIS_URL"]["value"] == _redis_url()


def test_rayjob_places_one_worker_per_gpu_on_the_cluster() -> None:
    job = k8s_object("RayJob", "kvgate-workers")
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": _raycluster()["metadata"]["name"]}
    assert job["spec"]["shutdownAfterJobFinishes"] is False, "it must never tear the shared cluster down"
    assert "rayClusterSpec" not in job["spec"]
    assert shlex.split(job["spec"]["entrypoint"])[:2] == ["kvgate", "workers"]
    (workers,) = [i for i in all_invocations() if i.source == "RayJob/kvgate-workers"]
    gpus = (
        _gpu_group()["replicas"]
        * _container(_gpu_group()["template"]["spec"])["resources"]["limits"]["nvidia.com/gpu"]
    )
    assert int(workers.value("--workers")) == gpus
    # the driver runs on the head: the URL comes from the head's environment, not the command line
    assert "--redis-url" not in workers.flags
    head = _container(_raycluster()["spec"]["headGroupSpec"]["template"]["spec"])
    assert _env(head)["KVGATE_REDIS_URL"]["value"] == _redis_url()
    assert _gpu_group()["minReplicas"] == _gpu_group()["replicas"] == _gpu_group()["maxReplicas"]


def test_pods_run_as_the_images_non_root_user() -> None:
    for owner, pod in _pod_templates():
        if _container(pod)["image"].startswith("kvgate:"):
            assert pod["securityContext"]["runAsNonRoot"] is True, owner
            assert str(pod["securityContext"]["runAsUser"]) == _image_user(), owner


def _image_user() -> str:
    users = {
        [i.args for i in dockerfile(DEPLOY / name) if i.keyword == "USER"][-1]
        for name in ("Dockerfile", "Dockerfile.cpu")
    }
    (user,) = users
    return user
