"""The deployment files are checked, not just shipped: docker-compose.yml against the Compose
specification's schema, deploy/*.yaml against the Kubernetes schemas, the Envoy config by
Envoy itself; the container config wires the domain services; every service that listens
beyond loopback checks tokens from a secret; the sidecar-in-pod example runs over its socket."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from hookmesh.client import AgentClient
from hookmesh.remote import load_middleware
from hookmesh.schema import CustomEvent
from hookmesh.services.agent import load_config, start_agent_service
from hookmesh.testing import envoy_binary
from tests.agent_helpers import SHORT_TIMEOUT
from tests.envoy import CONFIG as ENVOY_CONFIG
from tests.sidecar_process import sidecar_process

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
MANIFESTS = [ROOT / "deploy" / n for n in ("agent.yaml", "envoy.yaml", "services.yaml")]
POD = ROOT / "deploy" / "sidecar-in-pod.yaml"
CONTAINER_CONFIG = ROOT / "deploy" / "container" / "agent.yaml"
K8S_VERSION = "1.33.0"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _check_compose(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
         str(path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_compose_file_follows_the_compose_specification(tmp_path: Path) -> None:
    checked = _check_compose(COMPOSE)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"]["agent"]["replica_count"] = 2  # no such key in the spec
    (tmp_path / "docker-compose.yml").write_text(yaml.safe_dump(broken))
    assert _check_compose(tmp_path / "docker-compose.yml").returncode != 0  # the check bites


@pytest.mark.parametrize("path", [*MANIFESTS, POD], ids=lambda p: p.name)
def test_kubernetes_manifests_follow_the_kubernetes_schemas(path: Path) -> None:
    for doc in _docs(path):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_kubernetes_check_bites() -> None:
    deployment = next(d for d in _docs(MANIFESTS[0]) if d["kind"] == "Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_envoy_accepts_its_config() -> None:
    checked = subprocess.run(
        [envoy_binary(), "--mode", "validate", "-c", str(ENVOY_CONFIG), "--disable-hot-restart",
         "-l", "error"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {
        d["metadata"]["name"]: d
        for path in (*MANIFESTS, POD)
        for d in _docs(path)
        if d["kind"] == kind
    }


def test_agent_replicas_run_on_postgresql_with_grpc_probes_and_an_autoscaler() -> None:
    deployments = _by_kind("Deployment")
    agent = deployments["hookmesh-agent"]
    assert agent["spec"]["replicas"] > 1
    assert load_config(CONTAINER_CONFIG).store.startswith("postgresql://")
    hpa = _by_kind("HorizontalPodAutoscaler")["hookmesh-agent"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == "hookmesh-agent"
    assert hpa["spec"]["minReplicas"] > 1
    for name, deployment in deployments.items():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            if container["image"].startswith("hookmesh") and container.get("ports"):
                assert "grpc" in container["readinessProbe"], (name, container["name"])


def test_envoy_names_the_services_compose_and_kubernetes_publish() -> None:
    envoy = yaml.safe_load(ENVOY_CONFIG.read_text())
    hosts = {
        e["endpoint"]["address"]["socket_address"]["address"]
        for c in envoy["static_resources"]["clusters"]
        for group in c["load_assignment"]["endpoints"]
        for e in group["lb_endpoints"]
    }
    assert hosts <= set(yaml.safe_load(COMPOSE.read_text())["services"])
    assert hosts <= set(_by_kind("Service"))


def _listens_openly(args: list[str]) -> bool:
    return any(a.startswith("0.0.0.0:") for a in args)


def test_every_service_beyond_loopback_checks_tokens_from_a_secret() -> None:
    """Issue 13's rule: a non-loopback bind only with auth configured, tokens from secrets."""
    container = load_config(CONTAINER_CONFIG)
    assert container.listen.startswith("0.0.0.0:")
    assert container.auth.token_file == "/run/secrets/hookmesh-tokens"
    compose = yaml.safe_load(COMPOSE.read_text())
    for name, service in compose["services"].items():
        command = " ".join(service.get("entrypoint") or []) + " ".join(service.get("command", []))
        if "0.0.0.0:" not in command:
            continue
        env = service.get("environment", {})
        authed = "--config /etc/hookmesh/agent.yaml" in command or "--token-env" in command
        authed = authed or any(k.endswith("AUTH__TOKEN_FILE") for k in env)
        assert authed, name
        assert "hookmesh-tokens" in str(service.get("secrets")) or "--token-env" in command
    for name, deployment in _by_kind("Deployment").items():
        for c in deployment["spec"]["template"]["spec"]["containers"]:
            if not c["image"].startswith("hookmesh") or not _listens_openly(c["args"]):
                continue
            env = {e["name"]: e for e in c.get("env", [])}
            authed = "--config" in c["args"] or "--token-env" in c["args"]
            authed = authed or any(k.endswith("AUTH__TOKEN_FILE") for k in env)
            assert authed, (name, c["name"])
            for variable in env.values():  # secrets come from Secrets, never inline
                if "TOKEN" in variable["name"] and "FILE" not in variable["name"]:
                    assert "secretKeyRef" in variable.get("valueFrom", {}), variable


def test_the_container_config_wires_retrieval_memory_and_tts() -> None:
    config = load_config(CONTAINER_CONFIG)
    local = [
        load_middleware(m.import_path, **m.params) for m in config.middlewares if m.type == "local"
    ]
    names = {type(m).__name__ for m in local}
    assert {"RAGMiddleware", "MemoryMiddleware", "TTSMiddleware"} <= names


async def test_the_sidecar_in_pod_example_runs_over_its_unix_socket(tmp_path: Path) -> None:
    docs = _docs(POD)
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    sidecar_args = next(c for c in pod["containers"] if c["name"] == "audit-sidecar")["args"]
    settings = yaml.safe_load(config_map["data"]["agent.yaml"])
    (remote,) = settings["middlewares"]
    listen = sidecar_args[sidecar_args.index("--listen") + 1]
    assert remote["target"] == listen and listen.startswith("unix:///")
    socket = f"unix://{tmp_path}/audit.sock"  # the pod's shared emptyDir, here a tmp folder
    middleware = sidecar_args[sidecar_args.index("--middleware") + 1]
    async with sidecar_process(middleware, listen=socket):
        settings.update(store=f"sqlite:///{tmp_path}/agent.db", auth={})
        settings["middlewares"] = [{**remote, "target": socket}]
        service = await start_agent_service(load_config(None, **settings), address="127.0.0.1:0")
        try:
            async with AgentClient(f"127.0.0.1:{service.port}", timeout=SHORT_TIMEOUT) as client:
                events = [e async for e in client.reply("weather in Oslo?")]
        finally:
            await service.stop(None)
    audits = [e for e in events if isinstance(e, CustomEvent) and e.name.startswith("audit")]
    assert [a.value["tool"] for a in audits] == ["get_weather"]  # type: ignore[index]
