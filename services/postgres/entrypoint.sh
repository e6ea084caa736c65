#!/bin/sh
# The PostgreSQL image's start (services/postgres/Dockerfile). On the first start (an empty
# PGDATA): initdb with POSTGRES_USER as the superuser and the password in
# POSTGRES_PASSWORD_FILE (a secret, never an argument), the database POSTGRES_DB, and password
# logins from any address (the container's network; Compose publishes no port). Then, every
# start: postgres in the foreground on POSTGRES_LISTEN (default all of the container's
# addresses) and PGPORT (default 5432), extra arguments passed on.
set -eu
user="${POSTGRES_USER:-postgres}"
database="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	password="${POSTGRES_PASSWORD_FILE:?set POSTGRES_PASSWORD_FILE to a file holding the password}"
	initdb --pgdata="$PGDATA" --username="$user" --pwfile="$password" --auth=scram-sha-256 \
		--encoding=UTF8 --locale=C >/dev/null
	echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
	if [ "$database" != postgres ]; then
		echo "CREATE DATABASE \"$database\" OWNER \"$user\"" \
			| postgres --single -D "$PGDATA" postgres >/dev/null
	fi
	echo "initialised $PGDATA: user $user, database $database"
fi
exec postgres -D "$PGDATA" -c "listen_addresses=${POSTGRES_LISTEN:-*}" -c "port=${PGPORT:-5432}" \
	-c unix_socket_directories=/var/run/postgresql "$@"
