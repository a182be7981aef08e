"""Every deploy file parses, and the runbook names every one of them."""

from __future__ import annotations

import pytest

from tests.deploy.files import DEPLOY, ROOT, RUNBOOK, deploy_files, documents, pyproject, yaml_files

EXPECTED = {
    "Dockerfile",
    "Dockerfile.cpu",
    "compose.yaml",
    "kuberay/raycluster.yaml",
    "kuberay/gateway.yaml",
    "kuberay/redis.yaml",
    "kuberay/secret.yaml",
    "kuberay/workers-rayjob.yaml",
    "ray/cluster.yaml",
    "prometheus/prometheus.yml",
    "README.md",
}


def test_the_required_files_exist() -> None:
    present = {str(p.relative_to(DEPLOY)) for p in deploy_files()}
    assert present >= EXPECTED, sorted(EXPECTED - present)


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_yaml_file_parses(path) -> None:
    assert documents(path), f"{path} holds no YAML document"


def test_the_runbook_mentions_every_deploy_file() -> None:
    text = RUNBOOK.read_text()
    missing = [
        f"deploy/{p.relative_to(DEPLOY)}"
        for p in deploy_files()
        if p != RUNBOOK and f"deploy/{p.relative_to(DEPLOY)}" not in text
    ]
    assert not missing, f"deploy/README.md does not mention {missing}"


def test_the_runbook_covers_the_brief() -> None:
    text = RUNBOOK.read_text()
    for needle in (
        "ray start --head",
        "ray start --address",
        "kvgate workers",
        "kvgate gateway",
        "curl",
        "from openai import OpenAI",
        "cached_tokens",
        "2 (K and V) × KV heads × head dim × bytes of the dtype",
        "rediss://",
        "KVGATE_HASH_SECRET",
        "fingerprint",
        "new epoch",
    ):
        assert needle in text, needle
    for heading in ("## Sizing the KV pools", "## Failure handling", "## Upgrades", "## Security"):
        assert heading in text, heading


def test_pyyaml_is_in_the_dev_extra() -> None:
    dev = pyproject()["project"]["optional-dependencies"]["dev"]
    assert any(req.lower().startswith("pyyaml") for req in dev), dev


def test_example_env_files_hold_no_secret() -> None:
    for example in (DEPLOY / ".env.example", DEPLOY / "ray" / "kvgate.env.example"):
        values = dict(
            line.split("=", 1) for line in example.read_text().splitlines() if line and line[0] != "#"
        )
        assert values["KVGATE_HASH_SECRET"] == "", example
        assert values.get("REDIS_PASSWORD", "") == "", example
    assert (ROOT / "deploy" / "kuberay" / "secret.yaml").read_text().count("REPLACE-ME") == 2
