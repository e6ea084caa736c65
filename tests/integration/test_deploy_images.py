"""The Kubernetes and Compose files run the images `make image` builds, as the users those
images define: every hookmesh container is checked by gRPC health on its own port (what the
image's HEALTHCHECK asks), and every pod can read the Secret it mounts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = [ROOT / "deploy" / n for n in ("agent.yaml", "envoy.yaml", "services.yaml",
                                           "sidecar-in-pod.yaml")]  # fmt: skip
BUILT = {"hookmesh": "agent", "hookmesh-envoy": "envoy", "hookmesh-postgres": "postgres"}
"""Image name → its folder under services/ (scripts/build-image.sh)."""


def _uid(image: str) -> int:
    dockerfile = (ROOT / "services" / BUILT[image] / "Dockerfile").read_text()
    found = re.search(r"useradd .*--uid (\d+)", dockerfile)
    assert found, image
    return int(found.group(1))


def _pods() -> list[dict[str, Any]]:
    docs = [d for path in MANIFESTS for d in yaml.safe_load_all(path.read_text()) if d]
    return [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"]


def test_every_container_runs_an_image_make_image_builds_as_its_user() -> None:
    for pod in _pods():
        images = {c["image"].split(":")[0] for c in pod["containers"]}
        assert images <= set(BUILT), images
        (image,) = images  # one image per pod, so one user
        assert pod["securityContext"]["runAsUser"] == _uid(image)
        assert pod["securityContext"]["runAsNonRoot"] is True
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for name, service in compose.items():
        if "telemetry" in service.get("profiles", []):
            continue  # the collector comes from Docker Hub, on request
        assert service["image"].split(":")[0] in BUILT, name


def test_hookmesh_containers_are_probed_by_grpc_health_on_their_port() -> None:
    for pod in _pods():
        for container in pod["containers"]:
            if not container["image"].startswith("hookmesh:") or "ports" not in container:
                continue
            (port,) = (p["containerPort"] for p in container["ports"])
            for probe in ("readinessProbe", "livenessProbe"):
                assert container[probe]["grpc"]["port"] == port, (container["name"], probe)


def test_every_pod_can_read_the_secret_it_mounts() -> None:
    for pod in _pods():
        for volume in pod.get("volumes", []):
            if "secret" not in volume:
                continue
            mode = volume["secret"]["defaultMode"]
            # Owned by root, group fsGroup: the image's user reads it through its group.
            assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsUser"]
            assert mode & 0o040 and not mode & 0o007, oct(mode)
