#!/usr/bin/env bash
# A Docker engine for the container tests, started only when none answers: Debian's dockerd
# (package docker.io), with no bridge and no iptables rules, so containers run on the host's
# network alone (`--network host`, loopback binds) and nothing rewrites the machine's firewall.
#
#   scripts/start-docker.sh      (as root, or with sudo)
set -euo pipefail
docker info >/dev/null 2>&1 && exit 0
SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
LOG=/var/log/hookmesh-dockerd.log
# setsid: the engine must outlive the shell that started it.
$SUDO setsid dockerd --bridge=none --iptables=false --ip6tables=false >"$LOG" 2>&1 </dev/null &
for _ in $(seq 600); do  # up to 60 s for the socket to answer
	docker info >/dev/null 2>&1 && exit 0
	sleep 0.1
done
echo "dockerd did not answer within 60 s; the end of $LOG:" >&2
tail -n 30 "$LOG" >&2
exit 1
