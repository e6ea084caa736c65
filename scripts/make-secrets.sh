#!/usr/bin/env bash
# Makes the secret files docker-compose.yml mounts (and the Kubernetes Secret of
# docs/deploy.md is made from), with fresh random values:
#
#   hookmesh-tokens    PRINCIPAL:TOKEN lines every service accepts: ops (may reload the
#                      agent's middlewares), agent (the agent's own) and client (yours)
#   service-token      the agent's token, for the services and the sidecar
#   pgpass             libpq password file: the role hookmesh's password, on any host
#   postgres-password  the same password, for the database container
#
#   scripts/make-secrets.sh [DIR]      (default ./secrets; a complete DIR is kept as it is)
#
# DIR is private to you (0700) and ignored by git; the files in it are readable by others
# (0644) because the containers read them as users of their own (the images copy pgpass to a
# private file, as libpq demands).
set -euo pipefail
DIR="${1:-secrets}"
FILES=(hookmesh-tokens service-token pgpass postgres-password)
present=0
for file in "${FILES[@]}"; do [ -e "$DIR/$file" ] && present=$((present + 1)); done
if [ "$present" -eq "${#FILES[@]}" ]; then
	echo "$DIR: complete, kept"
	exit 0
elif [ "$present" -ne 0 ]; then
	echo "$DIR holds some of ${FILES[*]} but not all: remove it and run again" >&2
	exit 1
fi

random() { head -c 24 /dev/urandom | base64 | tr '+/' '-_'; }
umask 077
mkdir -p "$DIR"
chmod 0700 "$DIR"
echo '*' >"$DIR/.gitignore"
agent="$(random)"
password="$(random)"
printf 'ops:%s\nagent:%s\nclient:%s\n' "$(random)" "$agent" "$(random)" >"$DIR/hookmesh-tokens"
printf '%s\n' "$agent" >"$DIR/service-token"
printf '*:*:hookmesh:hookmesh:%s\n' "$password" >"$DIR/pgpass"
printf '%s\n' "$password" >"$DIR/postgres-password"
chmod 0644 "${FILES[@]/#/$DIR/}"
echo "$DIR: made ${FILES[*]}"
