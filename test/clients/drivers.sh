# drivers.sh: the five drivers of docs/clients.md, for the layers that run
# programs through them: test/clients/run (the guide against the server) and
# test/pooler/run (the same drivers behind PgBouncer). Sourced after
# test/bin/lib.sh; the functions use $WORK, the caller's scratch directory.
#   install_drivers               Debian's packages of the drivers, node-postgres from npm
#   driver_label DRIVER           "pgJDBC 42.5.5 (java 17.0.15)": what the layer lines print
#   driver_prove DRIVER PROGRAM   prove runs PROGRAM (a path under test/clients) through DRIVER
#   fresh_db NAME                 a new database with the extension and what the guides use
# DRIVER is one of node jdbc psycopg pgx dbd-pg.
CLIENTS=$REPO/test/clients
ALL_DRIVERS=(node jdbc psycopg pgx dbd-pg)
# pgJDBC and Jackson, for the programs' JSON, from Debian.
JDBC_JARS=/usr/share/java/postgresql.jar:/usr/share/java/jackson-databind.jar:/usr/share/java/jackson-core.jar:/usr/share/java/jackson-annotations.jar

install_drivers() {
  install_packages python3 python3-psycopg libdbd-pg-perl default-jdk-headless libpostgresql-jdbc-java libjackson2-databind-java \
    golang-go golang-github-jackc-pgx-v4-dev "postgresql-client-$PGVER"
  # node and npm from Debian, unless a node with its npm is installed already.
  command -v node >/dev/null && command -v npm >/dev/null || install_packages nodejs npm
  # node-postgres, as test/clients/node/package-lock.json pins it.
  (cd "$CLIENTS/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

driver_label() {
  case $1 in
    node)    echo "node-postgres $(cd "$CLIENTS/node" && node -p 'require("./package-lock.json").packages["node_modules/pg"].version') (node $(node --version))" ;;
    jdbc)    echo "pgJDBC $(dpkg-query -W -f='${Version}' libpostgresql-jdbc-java) (java $(java -version 2>&1 | sed -n '1s/.*"\(.*\)".*/\1/p'))" ;;
    psycopg) echo "psycopg $(/usr/bin/python3 -c 'import psycopg; print(psycopg.__version__)')" ;;
    pgx)     echo "pgx $(dpkg-query -W -f='${Version}' golang-github-jackc-pgx-v4-dev) ($(go version | cut -d' ' -f3))" ;;
    dbd-pg)  echo "DBD::Pg $(perl -MDBD::Pg -e 'print $DBD::Pg::VERSION')" ;;
    *)       die "unknown driver $1 (${ALL_DRIVERS[*]})" ;;
  esac
}

driver_prove() {
  local program=$2
  case $1 in
    node)    (cd "$CLIENTS" && prove --exec node "$program") ;;
    # A single-file program: java compiles and runs it.
    jdbc)    (cd "$CLIENTS" && prove --exec "java -cp $JDBC_JARS" "$program") ;;
    # Debian's python3, which has python3-psycopg (an earlier python3 on PATH may not).
    psycopg) (cd "$CLIENTS" && prove --exec /usr/bin/python3 "$program") ;;
    # Debian's Go packages are sources under /usr/share/gocode: GOPATH mode.
    pgx)     (cd "$CLIENTS" && env GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= GOCACHE="${GOCACHE:-$WORK/go-build}" \
                prove --exec "go run" "$program") ;;
    dbd-pg)  (cd "$CLIENTS" && prove "$program") ;;
    *)       die "unknown driver $1 (${ALL_DRIVERS[*]})" ;;
  esac
}

# A new database NAME on the server PG* names (the old one dropped, and its
# sessions ended), with the extension, docs/usage.md's HTTP handler and
# stored procedure, and setup.sql.
fresh_db() {
  psql -X -q -d postgres -v ON_ERROR_STOP=1 -c 'SET client_min_messages = warning' -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" &&
  { echo 'CREATE EXTENSION idempotency;'; python3 "$CLIENTS/snippets.py" usage-sql; cat "$CLIENTS/setup.sql"; } \
    | psql -X -q -d "$1" -v ON_ERROR_STOP=1 >/dev/null
}
