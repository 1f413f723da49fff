# runner.sh: the portable edition's regress, isolation and pgTAP runners
# (sourced, not run): test/bin/portable runs them on PostgreSQL 15 in its
# private prefix (through pg_tle and through the plain script), run-major
# through the plain script on the other majors (make test PG=NN). The
# sourcing script sets BIN (the major's bin), PGXS_DIR (its pgxs), WORK
# (where the runs' files go), SQL_OUT (the assembled scripts), VERSION and
# PGVER, and exports PG* for the cluster's superuser; the cluster is made by
# portable_initdb. Paths are relative to the repository (the current
# directory).

PASSWORD=portable-tests   # the runners' (dblink needs one for a role that is not a superuser)

# portable_initdb DATA PRELOAD: a new cluster in DATA with the settings a
# managed service uses (shared_preload_libraries = PRELOAD only), the
# runners logging in with a password as there, and PGPASSFILE (exported)
# holding that password.
portable_initdb() {
  local data=$1
  export PGPASSFILE=$WORK/pgpass
  printf '*:*:*:%s:%s\n' idem_admin "$PASSWORD" >"$PGPASSFILE"
  chmod 600 "$PGPASSFILE"
  [ "$(id -u)" = 0 ] && chown postgres: "$PGPASSFILE"
  [ -f "$data/PG_VERSION" ] && return 0
  server_owned_dir "$data"
  as_server_user "$BIN/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C >"$data.initdb.log" 2>&1 \
    || { cat "$data.initdb.log"; die "initdb failed"; }
  { printf 'local all idem_admin scram-sha-256\nhost all idem_admin 127.0.0.1/32 scram-sha-256\n'
    cat "$data/pg_hba.conf"; } >"$data/pg_hba.conf.new"
  mv "$data/pg_hba.conf.new" "$data/pg_hba.conf"
  [ "$(id -u)" = 0 ] && chown postgres: "$data/pg_hba.conf"
  # 13's default password_encryption is md5, which scram-sha-256 lines refuse.
  printf "shared_preload_libraries = '%s'\nmax_prepared_transactions = 10\npassword_encryption = 'scram-sha-256'\n" "$2" >>"$data/postgresql.conf"
}

# portable_start DATA PORT: starts that cluster (socket in DATA, TCP on
# 127.0.0.1) and exports PG* for its superuser. The server's own libpq
# (dblink) finds the runners' password in PGPASSFILE.
portable_start() {
  as_server_user env PGPASSFILE="$PGPASSFILE" "$BIN/pg_ctl" -D "$1" -l "$1/server.log" -w -s \
    -o "-p $2 -k '$1' -c listen_addresses=127.0.0.1" start \
    || { tail -n 30 "$1/server.log"; die "the server did not start"; }
  export PGHOST=$1 PGPORT=$2 PGUSER=postgres
}

# The scripts, assembled from src/sql: pg_tle's and the plain one.
assemble_scripts() {
  mkdir -p "$SQL_OUT"
  src/sql/assemble src/sql/install.portable "$VERSION" >"$SQL_OUT/idempotency--$VERSION.sql"
  src/sql/assemble --script src/sql/install.portable "$VERSION" >"$SQL_OUT/idempotency-portable-$VERSION.sql"
}

psql_su() { "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -U postgres "$@"; }

# The role that runs MODE's suites, and the store installed where every
# test's database comes from (template1): through pg_tle by a role granted
# pgtle_admin, or by the plain script run by an ordinary role.
prepare_mode() {
  local mode=$1 runner
  runner=$(runner_of "$mode")
  psql_su -d postgres <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$runner') THEN
    CREATE ROLE $runner LOGIN CREATEDB CREATEROLE PASSWORD '$PASSWORD';
  END IF;
END \$\$;
SQL
  # What a managed service lets its administrator role set (the tests pin
  # max_stack_depth where they test deep nesting).
  # (GRANT SET ON PARAMETER is 15's: before it, the tests' SET of
  # max_stack_depth is refused, as on such a service.)
  [ "$PGVER" -lt 15 ] || psql_su -d postgres -c "GRANT SET ON PARAMETER max_stack_depth TO $runner"
  psql_su -d postgres -c "GRANT pg_monitor TO $runner"
  # From 16 a role with CREATEROLE makes a member of a role only with its
  # ADMIN OPTION, as a service's administrator has it (the tests make members
  # of pg_monitor, and security_limits of pg_read_all_data and
  # pg_write_all_data, whose rights the runner does not take).
  [ "$PGVER" -lt 16 ] || psql_su -d postgres -c "GRANT pg_monitor TO $runner WITH ADMIN TRUE" \
    -c "GRANT pg_read_all_data, pg_write_all_data TO $runner WITH ADMIN TRUE, INHERIT FALSE, SET FALSE"
  # Not the store's needs but a test's: first_look.spec saves a record to
  # a file and loads it back frozen (COPY ... FREEZE).
  psql_su -d postgres -c "GRANT pg_read_server_files, pg_write_server_files TO $runner"
  # amcheck, which some tests run over the store's table, as an
  # administrator is given it (the tests create it only if it is missing).
  psql_su -d template1 -c 'CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA public' \
    -c "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO $runner"
  if [ "$mode" = tle ]; then
    psql_su -d template1 -c 'CREATE EXTENSION IF NOT EXISTS pg_tle' -c "GRANT pgtle_admin TO $runner"
    "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$runner" -d template1 \
      -c "SELECT pgtle.uninstall_extension_if_exists('idempotency')" >/dev/null
    tle_install template1 "$runner" "$SQL_OUT/idempotency--$VERSION.sql"
  else
    # public without CREATE for all, as from 15 on (and on a service's older
    # majors after the advice of CVE-2018-1058).
    [ "$PGVER" -ge 15 ] || psql_su -d template1 -c 'REVOKE CREATE ON SCHEMA public FROM PUBLIC'
    psql_su -d template1 -c "GRANT CREATE ON DATABASE template1 TO $runner" \
      -c 'DROP SCHEMA IF EXISTS idempotency, idempotency_internal CASCADE' 2>/dev/null
    "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$runner" -d template1 -f "$SQL_OUT/idempotency-portable-$VERSION.sql" >/dev/null
    # From 15 on the owner of a database (the runner, of the tests') has
    # CREATE on its public (pg_database_owner owns it); before 15, granted.
    [ "$PGVER" -ge 15 ] || psql_su -d template1 -c "GRANT CREATE ON SCHEMA public TO $runner"
  fi
}

# The runner: idem_admin in both modes (granted pgtle_admin only in tle's
# cluster), so that the outputs name the same role.
runner_of() { echo idem_admin; }

# Roles a test run left behind (a test that failed before its cleanup),
# with what they own, so that the next run starts as on a new server.
drop_test_roles() {
  local roles db
  roles=$(psql_su -d postgres -At -c "SELECT string_agg(quote_ident(rolname), ', ') FROM pg_roles
                                      WHERE rolname !~ '^(pg_|postgres$|idem_admin$|pgtle_)'")
  [ -n "$roles" ] || return 0
  for db in $(psql_su -d postgres -At -c "SELECT datname FROM pg_database WHERE datallowconn"); do
    psql_su -d "$db" -c "DROP OWNED BY $roles CASCADE" >/dev/null 2>&1 || true
  done
  psql_su -d postgres -c "DROP ROLE $roles" >/dev/null
}

# fresh_db NAME MODE: a new database from template1 (where MODE's store
# is), owned by MODE's runner, with the settings pg_regress gives the
# databases it makes (setting lc_messages takes a superuser, so pg_regress
# runs with --use-existing).
fresh_db() {
  psql_su -d postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)"     -c "CREATE DATABASE $1 OWNER $(runner_of "$2") TEMPLATE template1" 2>&1 | grep -v NOTICE || true
  psql_su -d postgres -c "ALTER DATABASE $1 SET lc_messages TO 'C'" -c "ALTER DATABASE $1 SET lc_monetary TO 'C'"     -c "ALTER DATABASE $1 SET lc_numeric TO 'C'" -c "ALTER DATABASE $1 SET lc_time TO 'C'"     -c "ALTER DATABASE $1 SET bytea_output TO 'hex'" -c "ALTER DATABASE $1 SET timezone_abbreviations TO 'Default'"
}

# tle_install DB ROLE SCRIPT: pgtle.install_extension of SCRIPT as ROLE in DB.
tle_install() {
  { printf "SELECT pgtle.install_extension('idempotency', '%s', 'Exactly-once effects for retried commands (portable edition)', \$idem_tle\$\n" "$VERSION"
    cat "$3"
    printf "\$idem_tle\$, NULL, 'idempotency');\n"; } >"$SQL_OUT/tle-install.sql"
  "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$2" -d "$1" -f "$SQL_OUT/tle-install.sql" >/dev/null
}

# rewrite MODE FILE...: the shims a test file (and its expected output, the
# same way, since pg_regress echoes each statement) needs in MODE. Both
# modes: a role a test creates is created with the runner as its member
# (ROLE CURRENT_USER), which a non-superuser needs on PostgreSQL 15 to SET
# ROLE to it (16's createrole_self_grant does the same). The plain script:
# the extension is not created, it is there (installed in template1).
rewrite() {
  local mode=$1; shift
  sed -i -E \
    -e 's/^([[:space:]]*CREATE ROLE [a-z0-9_]+)( [^;]*)?;/\1\2 ROLE CURRENT_USER;/' \
    "$@"
  if [ "$mode" = script ]; then
    sed -i -E -e 's/^CREATE EXTENSION IF NOT EXISTS idempotency;/DO $$ BEGIN END $$; -- (installed by the plain script)/' \
      -e "s/^SELECT NOT EXISTS \(SELECT FROM pg_extension WHERE extname = 'idempotency'\) AS ([a-z_]+) \\\\gset/SELECT false AS \\1 \\\\gset/" "$@"
  fi
  # dblink lets a role that is not a superuser connect only with a password
  # in the connection string.
  sed -i -E "s/ user=%s'/ user=%s password=$PASSWORD'/g" "$@"
}

# The one test whose scale the portable edition cannot take as it is:
# store_properties begins 100,000 keys in one transaction (and 100,000 in
# another at the same time), and every open claim of the portable edition
# holds a lock to its transaction's end, which the server's lock table
# (about 7,000 with default settings) bounds: docs/managed.md, difference
# "claims per transaction". It runs with 2,000 and 1,500.
scale_shim() {
  sed -i -E -e 's/\b100000\b/2000/g' -e 's/\b75000\b/1500/g' "$@"
}

# strip_context FILE...: expected outputs as psql prints them with
# SHOW_CONTEXT never (which the launcher sets): no CONTEXT lines.
strip_context() {
  local f
  for f in "$@"; do
    awk '/^CONTEXT:  / { skip = 1; next }
         skip && /^([ \t]|PL\/pgSQL |SQL statement |SQL function |SQL expression |extension script )/ { next }
         { skip = 0; print }' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
  done
}

# The tests of a layer, from the Makefile, less those test/portable/skip
# names for MODE (each with why), or those named.
layer_tests() {
  local layer=$1 mode=$2 var; shift 2
  if [ $# -gt 0 ]; then printf '%s\n' "$@"; return; fi
  var=$([ "$layer" = regress ] && echo REGRESS || echo ISOLATION)
  for t in $(make -s --no-print-directory -f Makefile -f - print-var VAR="$var" PG_CONFIG=/bin/false <<<'print-var: ; @echo $($(VAR))' 2>/dev/null); do
    grep -Eq "^($layer|all) +($mode|both) +$t( |$)" test/portable/skip || echo "$t"
  done
}

# prepare_run LAYER MODE DIR TESTS...: DIR with the test files and the
# expected outputs for MODE (the native edition's, patched where the
# portable edition differs), shims applied.
prepare_run() {
  local layer=$1 mode=$2 dir=$3 src exp patches t p v; shift 3
  rm -rf "$dir" && mkdir -p "$dir/sql" "$dir/expected" "$dir/specs" "$dir/out"
  if [ "$layer" = regress ]; then src=sql exp=expected patches=test/portable/expected
  else src=test/isolation/specs exp=test/isolation/expected patches=test/portable/isolation; fi
  for t in "$@"; do
    if [ -f "test/portable/$layer/$t.sql" ] || [ -f "test/portable/$layer/$t.spec" ]; then   # the portable edition's own
      cp "test/portable/$layer/$t.sql" "$dir/sql/" 2>/dev/null || cp "test/portable/$layer/$t.spec" "$dir/specs/"
      cp "test/portable/$layer/$t.out" "$dir/expected/$t.out" 2>/dev/null || : >"$dir/expected/$t.out"
      continue
    fi
    if [ "$layer" = regress ]; then cp "sql/$t.sql" "$dir/sql/"; else cp "$src/$t.spec" "$dir/specs/"; fi
    cp "$exp/$t.out" "$dir/expected/$t.out"
    strip_context "$dir/expected/$t.out"
    # NAME.pgNN.diff applies on major NN only, NAME.pgNN+.diff from NN on.
    for p in "$patches/$t.diff" "$patches/$t.$mode.diff" "$patches/$t".pg*.diff; do
      [ -f "$p" ] || continue
      case $p in
        *.pg*+.diff) v=${p##*.pg}; [ "$PGVER" -ge "${v%+.diff}" ] || continue ;;
        *.pg*.diff) v=${p##*.pg}; [ "$PGVER" = "${v%.diff}" ] || continue ;;
      esac
      patch -s -p0 --no-backup-if-mismatch "$dir/expected/$t.out" <"$p" \
        || die "$p no longer applies to $exp/$t.out: make it again (docs/managed.md, Testing)"
    done
  done
  rewrite "$mode" "$dir"/sql/*.sql "$dir"/specs/*.spec "$dir"/expected/*.out 2>/dev/null || true
  # psql with SHOW_CONTEXT never, for both editions' outputs to agree.
  printf '#!/bin/sh\nexec "$@" -v SHOW_CONTEXT=never\n' >"$dir/launcher"
  chmod +x "$dir/launcher"
}

# The portable edition's own tests of a layer (test/portable/LAYER: its
# setup, security), which run after the native edition's.
own_tests() {
  local f
  for f in "test/portable/$1"/*.sql "test/portable/$1"/*.spec; do
    [ -f "$f" ] || continue
    f=$(basename "$f"); f=${f%.*}
    [ "$f" = portable_setup ] || echo "$f"
  done
}

run_regress() {
  local mode=$1 dir=$WORK/run-$1/regress tests; shift
  mapfile -t tests < <(layer_tests regress "$mode" "$@"; [ $# -gt 0 ] || own_tests regress)
  prepare_run regress "$mode" "$dir" portable_setup "${tests[@]}"
  fresh_db idem_portable_regress "$mode"
  # (From 16 pg_regress reads the expected outputs from --expecteddir, by
  # default the current directory, not --inputdir.)
  "$PGXS_DIR/src/test/regress/pg_regress" --bindir="$BIN" --launcher="$dir/launcher" --use-existing \
    $([ "$PGVER" -lt 16 ] || echo "--expecteddir=$dir") \
    --user="$(runner_of "$mode")" --inputdir="$dir" --outputdir="$dir/out" \
    --dbname=idem_portable_regress portable_setup "${tests[@]}" \
    || { cat "$dir/out/regression.diffs" 2>/dev/null; return 1; }
}

run_isolation() {
  local mode=$1 dir=$WORK/run-$1/isolation tests; shift
  mapfile -t tests < <(layer_tests isolation "$mode" "$@"; [ $# -gt 0 ] || own_tests isolation)
  prepare_run isolation "$mode" "$dir" "${tests[@]}"
  fresh_db idem_portable_isolation "$mode"
  [ "$mode" = tle ] && "$BIN/psql" -X -q -U "$(runner_of "$mode")" -d idem_portable_isolation -c 'CREATE EXTENSION idempotency'
  "$PGXS_DIR/src/test/isolation/pg_isolation_regress" --bindir="$BIN" --user="$(runner_of "$mode")" --use-existing \
    $([ "$PGVER" -lt 16 ] || echo "--expecteddir=$dir") \
    --inputdir="$dir" --outputdir="$dir/out" --dbname=idem_portable_isolation "${tests[@]}" \
    || { cat "$dir/out/regression.diffs" 2>/dev/null; return 1; }
}

# pgTAP: each file's TAP output, where every failing assertion must be one
# test/portable/pgtap.differences lists for this mode (and every one listed
# must fail: a difference that went away is removed from the list).
run_pgtap() {
  local mode=$1 runner dir=$WORK/run-$1/pgtap db=idem_portable_tap files=() f status=0; shift
  runner=$(runner_of "$mode")
  rm -rf "$dir" && mkdir -p "$dir/test/pgtap" "$dir/test/kat"
  cp test/pgtap/* "$dir/test/pgtap/" && cp test/kat/*.csv "$dir/test/kat/"
  rewrite "$mode" "$dir"/test/pgtap/*
  scale_shim "$dir/test/pgtap/store_properties.sql"
  fresh_db "$db" "$mode"
  # What the suites need that a role which is not a superuser cannot create.
  # (pg_walinspect is 15's: before it, purge_direct skips what needs it.)
  psql_su -d "$db" -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION dblink' \
    -c "GRANT EXECUTE ON FUNCTION pg_switch_wal() TO $runner" >/dev/null
  [ "$PGVER" -lt 15 ] || psql_su -d "$db" -c 'CREATE EXTENSION pg_walinspect' >/dev/null
  [ "$mode" = tle ] && "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$runner" -d "$db" -c 'CREATE EXTENSION idempotency'
  if [ $# -eq 0 ]; then files=("$dir"/test/pgtap/*.sql); else for f in "$@"; do files+=("$dir/test/pgtap/${f%.sql}.sql"); done; fi
  # On 13 fingerprint_properties alone takes two minutes (its pointer
  # walks, without 17's cache of search_path); 15 (both routes) and 18 run
  # it, and CI's time is bounded.
  if [ $# -eq 0 ] && [ "$PGVER" -lt 14 ]; then
    for f in "${!files[@]}"; do [[ ${files[$f]} != */fingerprint_properties.sql ]] || unset 'files[f]'; done
  fi
  (cd "$dir" && PGOPTIONS='-c client_min_messages=warning' pg_prove -v -U "$runner" -d "$db" "${files[@]#$dir/}") >"$dir/tap.out" 2>&1 || status=$?
  (cd "$dir" && "$BIN/psql" -X -q -U "$runner" -d "$db" -c 'CREATE SCHEMA bound' \
     -c "SELECT idempotency.idem_create_store('bound.records')" >/dev/null && \
   PGOPTIONS='-c client_min_messages=warning' pg_prove -v -U "$runner" --set store=bound.records -d "$db" \
     test/pgtap/store_transitions.sql test/pgtap/store_properties.sql test/pgtap/namespace_lease.sql \
     test/pgtap/batch_equivalence.sql) >"$dir/tap-bound.out" 2>&1 || status=$?
  tap_differences "$mode" "$dir/tap.out" "$dir/tap-bound.out"
}

# tap_differences MODE OUTPUT...: passes when every "not ok" line is one
# test/portable/pgtap.differences lists for MODE (on this major: MODE:NN+
# lists it from major NN on), and each listed one failed.
tap_differences() {
  local mode=$1 failed allowed ok=0; shift
  failed=$(cat "$@" | sed -n 's/^not ok [0-9]* - //p' | sort -u)
  allowed=$(grep -Ev '^(#|$)' test/portable/pgtap.differences | awk -v m="$mode" -v v="$PGVER" '
    { split($1, f, ":"); from = f[2]; sub(/\+$/, "", from) }
    (f[1] == m || f[1] == "both") && (from == "" || v + 0 >= from + 0) { $1 = ""; sub(/^ /, ""); print }' | sort -u)
  cat "$@" | grep -E '^(not ok|ok|[a-z_/]+\.sql \.+|Files=|Result:|# )' | grep -v '^ok ' || true
  while IFS= read -r t; do
    [ -n "$t" ] || continue
    grep -Fqx -- "$t" <<<"$allowed" || { echo "FAILED, and not a listed difference: $t"; ok=1; }
  done <<<"$failed"
  while IFS= read -r t; do
    [ -n "$t" ] || continue
    grep -Fqx -- "$t" <<<"$failed" || { echo "listed as a difference, but passed (remove it): $t"; ok=1; }
  done <<<"$allowed"
  grep -E 'Parse errors|Bad plan|Wstat: [1-9]|died' "$@" && ok=1
  return $ok
}
