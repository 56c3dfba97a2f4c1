#!/usr/bin/env bash
# A real PostgreSQL server for the store tests: Debian's package, one cluster listening on
# 127.0.0.1 only, a role and a database for trialkit. Prints the store URL on stdout (and
# nothing else there), so CI can do:
#
#   export TRIALKIT_TEST_POSTGRES_URL="$(.ci/postgres.sh)"
#
# Safe to run again: what exists is kept, a stopped cluster is started. Needs root (apt-get,
# pg_ctlcluster). Override the names with TRIALKIT_PG_USER, TRIALKIT_PG_PASSWORD,
# TRIALKIT_PG_DB and TRIALKIT_PG_PORT.
set -euo pipefail

user=${TRIALKIT_PG_USER:-trialkit}
password=${TRIALKIT_PG_PASSWORD:-trialkit}
database=${TRIALKIT_PG_DB:-trialkit}
port=${TRIALKIT_PG_PORT:-5432}

log() { echo "postgres.sh: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  log "run me as root (I install Debian's postgresql package and start its cluster)"
  exit 1
fi

installed_version() {
  # The newest server installed, e.g. 15 (Debian's package puts each in /usr/lib/postgresql/N).
  find /usr/lib/postgresql -mindepth 3 -maxdepth 3 -path '*/bin/postgres' 2>/dev/null |
    awk -F/ '{print $5}' | sort -V | tail -n 1
}

version=$(installed_version)
if [ -z "$version" ] || ! command -v pg_ctlcluster >/dev/null; then
  log "installing postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  version=$(installed_version)
fi
if [ -z "$version" ]; then
  log "the postgresql package installed no server under /usr/lib/postgresql"
  exit 1
fi

# In containers the package may leave no cluster behind (or one that was dropped).
if ! pg_lsclusters --no-header | awk -v v="$version" '$1 == v && $2 == "main" {found=1} END {exit !found}'; then
  log "creating cluster $version/main"
  pg_createcluster --port "$port" "$version" main >&2
fi
# Loopback only, in a file of our own (Debian's postgresql.conf includes conf.d/).
conf_dir=/etc/postgresql/$version/main/conf.d
mkdir -p "$conf_dir"
printf "listen_addresses = '127.0.0.1'\nport = %s\n" "$port" >"$conf_dir/trialkit.conf"

if pg_ctlcluster "$version" main status >/dev/null 2>&1; then
  if ! pg_isready -q -h 127.0.0.1 -p "$port"; then
    log "restarting cluster $version/main on 127.0.0.1:$port"
    pg_ctlcluster "$version" main restart >&2
  fi
else
  log "starting cluster $version/main on 127.0.0.1:$port"
  pg_ctlcluster "$version" main start >&2
fi

for _ in $(seq 1 60); do
  if pg_isready -q -h 127.0.0.1 -p "$port"; then
    break
  fi
  sleep 0.5
done
if ! pg_isready -q -h 127.0.0.1 -p "$port"; then
  log "the server did not accept connections on 127.0.0.1:$port within 30 s"
  exit 1
fi

psql_admin() {
  runuser -u postgres -- psql -qAtX -v ON_ERROR_STOP=1 -p "$port" "$@"
}

# CREATEDB lets tests make throwaway databases; the password works over TCP on loopback
# (Debian's pg_hba.conf asks for scram-sha-256 there).
psql_admin -v user="$user" -v password="$password" >/dev/null <<'SQL'
SELECT format('CREATE ROLE %I LOGIN CREATEDB PASSWORD %L', :'user', :'password')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'user') \gexec
SELECT format('ALTER ROLE %I LOGIN CREATEDB PASSWORD %L', :'user', :'password') \gexec
SQL
psql_admin -v user="$user" -v database="$database" >/dev/null <<'SQL'
SELECT format('CREATE DATABASE %I OWNER %I', :'database', :'user')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'database') \gexec
SQL

url="postgresql+psycopg://${user}:${password}@127.0.0.1:${port}/${database}"
log "ready: PostgreSQL $version at 127.0.0.1:$port, database $database"
echo "$url"
