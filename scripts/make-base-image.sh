#!/usr/bin/env bash
# The Debian base image the tests build hookmesh's images on, made from Debian's own packages
# (no image registry is reachable here): `debootstrap --variant=minbase bookworm` from the
# mirror apt uses, with Python and venv, imported into Docker as NAME. Made once: an image
# already called NAME is kept (`docker rmi NAME` makes it again).
#
#   scripts/make-base-image.sh [NAME]     (default hookmesh-base:bookworm; as root or with sudo)
set -euo pipefail
NAME="${1:-hookmesh-base:bookworm}"
if docker image inspect "$NAME" >/dev/null 2>&1; then
	echo "base image $NAME: cached"
	exit 0
fi
SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)

# The first Debian archive apt is configured with (one-line or deb822 sources).
mirror() {
	cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
		2>/dev/null | grep -E '^(deb |URIs:)' | grep -oE 'https?://[^ ]+/debian/?( |$)' \
		| head -n 1 | tr -d ' ' || true
}
MIRROR="${DEBIAN_MIRROR:-$(mirror)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

ROOTFS=$(mktemp -d)
trap '$SUDO rm -rf "$ROOTFS"' EXIT
start=$(date +%s)
$SUDO debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
	bookworm "$ROOTFS" "$MIRROR" >/dev/null
$SUDO rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
$SUDO tar -C "$ROOTFS" -c . | docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$NAME" >/dev/null
echo "base image $NAME: made from $MIRROR in $(($(date +%s) - start)) s"
