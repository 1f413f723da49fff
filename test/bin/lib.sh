# lib.sh: shell helpers shared by run-demo and run-tests (sourced, not run).
#
# Dependencies come from Debian's packages; a private PostgreSQL cluster runs
# as the invoking user, or as the `postgres` OS user when invoked as root
# (initdb refuses root).

set -euo pipefail

PGVER=${PGVER:-15}
PG_BIN=/usr/lib/postgresql/$PGVER/bin
export PG_CONFIG=${PG_CONFIG:-$PG_BIN/pg_config}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Runs a command as root: directly when we are root, through sudo otherwise.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Runs a command as the OS user that owns the private server.
as_server_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# Installs the Debian packages named, running apt-get only when one is missing.
install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

BUILD_PACKAGES=(make g++ libssl-dev "postgresql-$PGVER" "postgresql-server-dev-$PGVER")
TEST_PACKAGES=("postgresql-$PGVER-pgtap" libtap-parser-sourcehandler-pgtap-perl libipc-run-perl
               "postgresql-$PGVER-cron" libgtest-dev python3 python3-psycopg clang libclang-rt-14-dev)

# Builds the extension and installs it into the server's directories.
build_and_install() {
  say "building and installing the extension"
  make -C "$REPO" -s PG_CONFIG="$PG_CONFIG"
  as_root make -C "$REPO" -s install PG_CONFIG="$PG_CONFIG"
}

# run_layer NAME COMMAND...: runs one layer (or step) of a test script,
# records pass or fail; summary LABEL prints them and fails if any failed.
declare -a SUMMARY=()
FAILED=0
run_layer() {
  local name=$1; shift
  say "$name"
  if "$@"; then
    SUMMARY+=("PASS  $name")
  else
    SUMMARY+=("FAIL  $name")
    FAILED=$((FAILED + 1))
  fi
}
summary() {
  say "summary"
  printf '  %s\n' "${SUMMARY[@]}"
  echo "$1: $(( ${#SUMMARY[@]} - FAILED )) passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}

# The SQL suites, run from source tree SRC against the server that PG*
# names, with the PostgreSQL whose pg_config is PGCONFIG (run-tests uses the
# system's, sanitize its instrumented copy). pg_regress and isolation print
# their diffs when they fail, for CI logs.
suite_regress() {
  (cd "$1" && make -s installcheck PG_CONFIG="$2" ISOLATION=) || { cat "$1/regression.diffs" 2>/dev/null; return 1; }
}
suite_isolation() {
  (cd "$1" && make -s installcheck PG_CONFIG="$2" REGRESS=) || { cat "$1/output_iso/regression.diffs" 2>/dev/null; return 1; }
}
suite_pgtap() {
  local psql
  psql="$("$2" --bindir)/psql"
  "$psql" -X -q -d postgres -v ON_ERROR_STOP=1 -c 'CREATE DATABASE idempotency_tap' >/dev/null
  "$psql" -X -q -d idempotency_tap -v ON_ERROR_STOP=1 \
    -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION dblink' -c 'CREATE EXTENSION idempotency' >/dev/null
  (cd "$1" && pg_prove --ext .sql -d idempotency_tap test/pgtap/)
}

# Makes dir owned by the server user (when root) and traversable by it.
server_owned_dir() {
  mkdir -p "$1"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$1"; fi
  chmod 700 "$1"
}

# A TCP port on 127.0.0.1 that nothing listens on, from 54321 up.
free_port() {
  local p
  for p in $(seq 54321 54420); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  die "no free port between 54321 and 54420"
}

# cluster_start DATA_DIR PORT LISTEN [OPTIONS]: initialises (once) and starts
# a cluster whose socket lives in DATA_DIR (OPTIONS: more postgres -c
# settings), then exports PGHOST, PGPORT and PGUSER.
cluster_start() {
  local data=$1 port=$2 listen=$3 options=${4:-}
  server_owned_dir "$data"
  if [ ! -f "$data/PG_VERSION" ]; then
    as_server_user "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C >"$data.initdb.log" 2>&1 \
      || { cat "$data.initdb.log"; die "initdb failed"; }
  fi
  as_server_user "$PG_BIN/pg_ctl" -D "$data" -l "$data/server.log" -w -s \
    -o "-p $port -k '$data' -c listen_addresses='$listen' $options" start \
    || { tail -n 30 "$data/server.log"; die "the server did not start"; }
  export PGHOST=$data PGPORT=$port PGUSER=postgres
}

cluster_stop() {
  as_server_user "$PG_BIN/pg_ctl" -D "$1" -m fast -w -s stop || true
}
