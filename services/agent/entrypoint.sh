#!/bin/sh
# The image's entrypoint: `hookmesh ARGS`, once mounted secrets are in the shape their readers
# need (Compose and Kubernetes mount them readable by a group or by everyone in the container):
#
#   HOOKMESH_SECRET_VARS="NAME=FILE ..."  each NAME is set to FILE's content: a token for a
#                                         --token-env flag or a middleware's token_env
#   PGPASSFILE=FILE                       copied to a file only this user may read, since
#                                         libpq ignores a password file others can read
#
# Then hookmesh replaces this shell, so it is the container's first process (signals, and
# the HEALTHCHECK that reads its command line).
set -eu
for pair in ${HOOKMESH_SECRET_VARS:-}; do
	name="${pair%%=*}"
	case "$name" in
		'' | *[!A-Za-z0-9_]* | [0-9]*) echo "error: HOOKMESH_SECRET_VARS: bad entry $pair" >&2; exit 2 ;;
	esac
	value="$(cat "${pair#*=}")"
	export "$name=$value"
done
unset HOOKMESH_SECRET_VARS
if [ -n "${PGPASSFILE:-}" ] && [ -r "$PGPASSFILE" ]; then
	private="$(mktemp "$( [ -w /dev/shm ] && echo /dev/shm || echo /tmp )/pgpass.XXXXXX")"
	cat "$PGPASSFILE" >"$private"
	export PGPASSFILE="$private"
fi
exec hookmesh "$@"
