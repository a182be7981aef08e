"""deploy/prometheus/: the scrape targets are the gateway's and the workers' metrics ports, as the compose
stack and the Kubernetes manifests name them."""

from __future__ import annotations

import fnmatch
from typing import Any

from tests.deploy import planned
from tests.deploy.files import DEPLOY, PROMETHEUS, compose, document, k8s_object

MOUNT = "/etc/prometheus"  # where compose mounts deploy/prometheus/


def _jobs(name: str) -> dict[str, dict[str, Any]]:
    return {job["job_name"]: job for job in document(PROMETHEUS / name)["scrape_configs"]}


def _host_port(target: str) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    return host, int(port)


def test_gateway_is_scraped_on_the_http_port() -> None:
    job = _jobs("prometheus.yml")["kvgate-gateway"]
    assert job["metrics_path"] == planned.METRICS_PATH
    targets = [t for group in job["static_configs"] for t in group["targets"]]
    assert targets == [f"gateway:{planned.HTTP_PORT}"]
    assert "gateway" in compose()["services"]


def test_workers_are_discovered_from_the_shipped_target_files() -> None:
    job = _jobs("prometheus.yml")["kvgate-workers"]
    assert job["metrics_path"] == planned.METRICS_PATH
    (sd,) = job["file_sd_configs"]
    shipped = [f"{MOUNT}/{p.relative_to(PROMETHEUS)}" for p in (PROMETHEUS / "targets").glob("*")]
    matched = [f for f in shipped if any(fnmatch.fnmatch(f, pattern) for pattern in sd["files"])]
    assert matched == [f"{MOUNT}/targets/workers.yml"]
    for group in document(PROMETHEUS / "targets" / "workers.yml"):
        for target in group["targets"]:
            host, port = _host_port(target)
            assert host in compose()["services"]
            assert planned.WORKER_METRICS_BASE <= port < planned.WORKER_METRICS_BASE + 8
        assert group["labels"]["component"] == "worker"


def test_ray_nodes_are_scraped_on_their_metrics_export_port() -> None:
    job = _jobs("prometheus.yml")["ray"]
    targets = [t for group in job["static_configs"] for t in group["targets"]]
    services = compose()["services"]
    for target in targets:
        host, port = _host_port(target)
        assert port == planned.RAY_METRICS_PORT
        assert f"--metrics-export-port={port}" in services[host]["command"]


def test_kubernetes_variant_keeps_ports_the_manifests_declare() -> None:
    jobs = _jobs("prometheus-k8s.yml")
    gateway_ports = _container_ports(k8s_object("Deployment", "kvgate-gateway")["spec"]["template"]["spec"])
    ray = k8s_object("RayCluster", "kvgate")["spec"]
    (group,) = ray["workerGroupSpecs"]
    worker_ports = _container_ports(group["template"]["spec"])
    head_ports = _container_ports(ray["headGroupSpec"]["template"]["spec"])
    assert gateway_ports[_kept_port_name(jobs["kvgate-gateway"])] == planned.HTTP_PORT
    assert worker_ports[_kept_port_name(jobs["kvgate-workers"])] == planned.WORKER_METRICS_BASE
    ray_port = _kept_port_name(jobs["ray"])
    assert worker_ports[ray_port] == head_ports[ray_port] == planned.RAY_METRICS_PORT
    for job in jobs.values():
        (sd,) = job["kubernetes_sd_configs"]
        assert sd["role"] == "pod"
        assert sd["namespaces"]["names"] == ["kvgate"]


def _container_ports(pod: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in pod["containers"][0]["ports"]}


def _kept_port_name(job: dict[str, Any]) -> str:
    (rule,) = [
        r
        for r in job["relabel_configs"]
        if r.get("action") == "keep" and r["source_labels"] == ["__meta_kubernetes_pod_container_port_name"]
    ]
    return rule["regex"]


def test_both_configs_parse_as_prometheus_configs() -> None:
    for name in ("prometheus.yml", "prometheus-k8s.yml"):
        config = document(PROMETHEUS / name)
        assert set(config) <= {"global", "scrape_configs", "rule_files", "alerting"}
        names = [job["job_name"] for job in config["scrape_configs"]]
        assert len(names) == len(set(names)), name
    assert (DEPLOY / "prometheus" / "targets" / "workers.yml").is_file()
