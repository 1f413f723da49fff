# lifecycle.sh: test/bin/portable's lifecycle layer (sourced by it, whose
# helpers it uses): the portable edition installed, dumped and restored,
# updated, moved to the native edition and back, and moved into from a
# hand-written table, the way docs/managed.md tells a team to. Each step
# prints what it checks; the first failure stops the layer.
#
# Both modes: a store with records of every kind (committed, failed, a
# leased claim in progress with its fence), a namespace granted to a role,
# and changed defaults, compared before and after each move (lc_state), and
# used after it (lc_use: the replay, the error, the claim finished with its
# old fence). tle: pg_dump and pg_restore into a new database; an update
# with ALTER EXTENSION ... UPDATE (install_update_path); the dump restored
# on a server with the native edition's files as the native edition; a
# native database's dump restored through pg_tle as the portable edition.
# script: the plain script run by a role with nothing but CREATE on the
# database (public without CREATE); run twice (refused); updated in place
# by a later script; dumped and restored; squatted schema and default
# privileges. Both: the import of docs/examples/import_idempotency_keys.sql.

LC_APP=idem_lc_app

# lc_sql DB [ROLE] : psql on MODE's cluster, stdin's SQL, unaligned output.
lc_sql() { "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -U "${2:-${LC_OWNER:-$(runner_of "$LC_MODE")}}" -d "$1"; }

# lc_db DB : a new database from template0, owned by the runner, with
# pg_tle created in it (tle) as the service's administrator would.
lc_db() {
  psql_su -d postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1 OWNER $(runner_of "$LC_MODE") TEMPLATE template0" 2>&1 | grep -v NOTICE || true
  [ "$LC_MODE" = tle ] && psql_su -d "$1" -c 'CREATE EXTENSION pg_tle' >/dev/null
  return 0
}

# lc_install DB : the store, as a user installs it in MODE.
lc_install() {
  if [ "$LC_MODE" = tle ]; then
    tle_install "$1" "$(runner_of tle)" "$SQL_OUT/idempotency--$VERSION.sql"
    echo 'CREATE EXTENSION idempotency;' | lc_sql "$1"
  else
    "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$(runner_of script)" -d "$1" -f "$SQL_OUT/idempotency-portable-$VERSION.sql" >/dev/null
  fi
}

# lc_fill DB : records of every kind, a grant, changed defaults.
lc_fill() {
  lc_sql "$1" >/dev/null <<SQL
SELECT idempotency.idem_namespace_defaults(replay_window => '3 days', in_progress_lease => '0', store_request => true,
                                           max_payload_bytes => 1000000, in_flight_wait => '0', require_registered => false);
SELECT idempotency.idem_namespace_configure('lc-lease', in_progress_lease => '1 hour');
SELECT idempotency.idem_grant('lc-app', '$LC_APP');
SET ROLE $LC_APP;
BEGIN;
SELECT kind FROM idempotency.idem_begin('lc-app', 'paid', '{"amount": 5}');
SELECT idempotency.idem_commit('lc-app', 'paid', '{"payment_id": 7}');
COMMIT;
BEGIN;
SELECT kind FROM idempotency.idem_begin('lc-app', 'declined', '{"amount": 6}');
SELECT idempotency.idem_fail_permanent('lc-app', 'declined', '{"class_tag": "Declined", "message": "no funds"}');
COMMIT;
RESET ROLE;
SELECT kind FROM idempotency.idem_begin('lc-lease', 'running', '{"job": 1}');
SQL
}

# What a move must keep, one line a fact.
LC_STATE_SQL="
SELECT 'record', namespace, key_value, status, encode(request_hash, 'hex'), request_payload, result_payload, error_payload,
       created_at, updated_at, expires_at, attempt, fence, recovery_point, recovery_state
FROM idempotency.idempotency_record ORDER BY namespace, key_value;
SELECT 'namespace', namespace, hash_keys, replay_window, in_progress_lease, store_request, max_payload_bytes, store, fingerprint_ignore
FROM idempotency.idem_namespace_config ORDER BY namespace;
SELECT 'grant', namespace, grantee::text FROM idempotency.idem_namespace_grant ORDER BY 2, 3;
SELECT 'defaults', replay_window, in_progress_lease, store_request, max_payload_bytes, in_flight_wait, require_registered
FROM idempotency.idem_defaults;
SELECT 'schema usage', has_schema_privilege('$LC_APP', 'idempotency', 'USAGE');"
lc_state() { echo "$LC_STATE_SQL" | lc_sql "$@"; }

# lc_use DB EDITION : the store works after the move, as the granted role:
# the replay, the error, and the leased claim finished under its old fence.
lc_use() {
  local fence got
  fence=$(echo "SELECT fence FROM idempotency.idempotency_record WHERE namespace = 'lc-lease' AND key_value = 'running'" | lc_sql "$1")
  got=$(lc_sql "$1" <<SQL
SELECT edition FROM idempotency.idem_version();
SELECT idempotency.idem_commit('lc-lease', 'running', '{"done": true}', $fence);
SET ROLE $LC_APP;
SELECT kind, result FROM idempotency.idem_begin('lc-app', 'paid', '{"amount": 5}');
SELECT kind, error FROM idempotency.idem_begin('lc-app', 'declined', '{"amount": 6}');
SELECT kind, recorded_request FROM idempotency.idem_begin('lc-app', 'paid', '{"amount": 9}');
SQL
)
  lc_expect "$got" "$2

prior_result|{\"payment_id\": 7}
prior_error|{\"message\": \"no funds\", \"class_tag\": \"Declined\"}
mismatch|{\"amount\": 5}" "the store works after the move ($2)"
}

lc_expect() { # GOT WANT WHAT
  if [ "$1" = "$2" ]; then echo "  ok: $3"; else
    echo "  FAILED: $3"; diff <(printf '%s\n' "$2") <(printf '%s\n' "$1") | head -20; LC_FAILED=1; return 1; fi
}

# lc_same FILE1 FILE2 WHAT: the same facts (the defaults among them: an
# install writes no row of idem_defaults, so the dumped one is restored).
lc_same() { # FILE1 FILE2 WHAT
  if cmp -s "$1" "$2"; then echo "  ok: $3 ($(wc -l <"$1") facts)"; else
    echo "  FAILED: $3"; diff "$1" "$2" | cut -c1-200 | head -20; LC_FAILED=1; return 1; fi
}

lc_role() { # the granted role, on MODE's cluster (and the runner its member)
  psql_su -d postgres -c "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$LC_APP') THEN
                            CREATE ROLE $LC_APP; END IF; END \$\$" -c "GRANT $LC_APP TO $(runner_of "$LC_MODE")" >/dev/null 2>&1
}

# pg_restore's list of a dump without pg_tle's own entries (its schema,
# extension, tables and the functions pgtle.install_extension made), which
# the target has or must not have: docs/managed.md, "Moving between
# editions". The schema idempotency is restored first and alone, without
# its owner, so that it is the restoring role's, as CREATE EXTENSION wants.
lc_list() {
  "$BIN/pg_restore" -l "$1" | grep -v -E ' (SCHEMA - pgtle|EXTENSION - pg_tle|COMMENT - EXTENSION pg_tle|TABLE DATA pgtle|FUNCTION pgtle) '
}

# lc_restore DUMP DB ROLE : pg_restore as ROLE into DB, in the two steps;
# prints its errors.
lc_restore() {
  local out list=$1.list
  lc_list "$1" >"$list"
  grep -E ' SCHEMA - idempotency ' "$list" >"$list.schema"
  grep -v -E ' SCHEMA - idempotency ' "$list" >"$list.rest"
  out=$({ "$BIN/pg_restore" -U "$3" -d "$2" --no-owner -L "$list.schema" "$1" && \
          "$BIN/pg_restore" -U "$3" -d "$2" -L "$list.rest" "$1"; } 2>&1 || true)
  out=$(printf '%s\n' "$out" | grep -E 'error:' | grep -v -E 'errors ignored on restore' || true)
  [ -z "$out" ] || { echo "  FAILED: pg_restore: $out"; LC_FAILED=1; return 1; }
}

lc_tle() {
  local d=$1 native_env
  # 0. Registered in a database, the extension is not for any role with
  #    CREATE there to create (and own): a member of pgtle_admin creates it.
  lc_db idem_lc_src && tle_install idem_lc_src "$(runner_of tle)" "$SQL_OUT/idempotency--$VERSION.sql"
  psql_su -d postgres -c "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'idem_plain') THEN CREATE ROLE idem_plain LOGIN; END IF; END \$\$" \
    -c "GRANT CREATE ON DATABASE idem_lc_src TO idem_plain" >/dev/null
  lc_expect "$(echo 'CREATE EXTENSION idempotency' | "$BIN/psql" -X -q -U idem_plain -d idem_lc_src 2>&1 | grep -o 'ERROR:.*')" \
    'ERROR:  permission denied to create extension "idempotency"' "a role with CREATE on the database but not pgtle_admin cannot create (and own) the store"
  echo 'CREATE EXTENSION idempotency;' | lc_sql idem_lc_src && lc_fill idem_lc_src
  lc_state idem_lc_src >"$d/src.state"
  # 1. pg_dump and pg_restore, into a database with pg_tle created.
  "$BIN/pg_dump" -Fc -U "$(runner_of tle)" -d idem_lc_src -f "$d/src.dump"
  lc_db idem_lc_copy && tle_install idem_lc_copy "$(runner_of tle)" "$SQL_OUT/idempotency--$VERSION.sql"
  lc_restore "$d/src.dump" idem_lc_copy "$(runner_of tle)"
  lc_state idem_lc_copy >"$d/copy.state"
  lc_same "$d/src.state" "$d/copy.state" "pg_dump and pg_restore keep every record, fence, grant and default (pg_tle)"
  # 2. An update through pg_tle: install_update_path, then ALTER EXTENSION.
  lc_sql idem_lc_copy <<SQL >/dev/null
SELECT pgtle.install_update_path('idempotency', '$VERSION', '$VERSION-lifecycle', \$u\$
CREATE OR REPLACE FUNCTION idempotency.idem_lifecycle_marker() RETURNS text LANGUAGE sql AS 'SELECT ''updated''';
\$u\$);
ALTER EXTENSION idempotency UPDATE TO '$VERSION-lifecycle';
SQL
  lc_expect "$(echo "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'; SELECT idempotency.idem_lifecycle_marker()" | lc_sql idem_lc_copy)" \
    "$VERSION-lifecycle
updated" "ALTER EXTENSION idempotency UPDATE runs an update path pg_tle installed"
  lc_state idem_lc_copy >"$d/updated.state"
  lc_same "$d/src.state" "$d/updated.state" "the update keeps them"
  lc_use idem_lc_copy portable
  # 3. To the native edition: the dump restored on a server with its files
  #    (this checkout's library, test/bin/check's server).
  native_env=$(test/bin/check env 2>"$d/check.log") || { cat "$d/check.log"; return 1; }
  ( eval "$native_env"
    "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d postgres >/dev/null <<SQL || exit 1
DROP DATABASE IF EXISTS idem_lc_native WITH (FORCE);
CREATE DATABASE idem_lc_native TEMPLATE template0;
DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$LC_APP') THEN CREATE ROLE $LC_APP; END IF;
              IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'idem_admin') THEN CREATE ROLE idem_admin; END IF; END \$\$;
SQL
    lc_restore "$d/src.dump" idem_lc_native "$PGUSER" || exit 1
    echo "$LC_STATE_SQL" | lc_sql_native idem_lc_native >"$d/native.state"
    lc_same "$d/src.state" "$d/native.state" "the pg_tle database's dump restores as the native edition, every record, fence, grant and default kept" || exit 1
    lc_native_use idem_lc_native || exit 1
    echo "$LC_STATE_SQL" | lc_sql_native idem_lc_native >"$d/native.after"
    # 4. And back: the native database's dump through pg_tle, installed in
    #    the target first, restored as the portable edition.
    "$BIN/pg_dump" -Fc -d idem_lc_native -f "$d/native.dump" ) || return 1
  lc_db idem_lc_back && tle_install idem_lc_back "$(runner_of tle)" "$SQL_OUT/idempotency--$VERSION.sql"
  lc_restore "$d/native.dump" idem_lc_back "$(runner_of tle)"
  lc_state idem_lc_back >"$d/back.state"
  lc_expect "$(echo 'SELECT edition FROM idempotency.idem_version()' | lc_sql idem_lc_back)" portable "the native dump restores through pg_tle as the portable edition"
  lc_same "$d/native.after" "$d/back.state" "  with every record, fence, grant and default the native database had"
}

# On the native server (PG* of test/bin/check), as its superuser.
lc_sql_native() { "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$1"; }
lc_native_use() {
  local fence got
  fence=$(echo "SELECT fence FROM idempotency.idempotency_record WHERE namespace = 'lc-lease' AND key_value = 'running'" | lc_sql_native "$1")
  got=$(lc_sql_native "$1" <<SQL
SELECT edition FROM idempotency.idem_version();
SET ROLE $LC_APP;
SELECT kind, result FROM idempotency.idem_begin('lc-app', 'paid', '{"amount": 5}');
SELECT kind, recorded_request FROM idempotency.idem_begin('lc-app', 'paid', '{"amount": 9}');
RESET ROLE;
SELECT idempotency.idem_commit('lc-lease', 'running', '{"done": true}', $fence);
SQL
)
  lc_expect "$got" "native
prior_result|{\"payment_id\": 7}
mismatch|{\"amount\": 5}" "the native edition answers the portable edition's records and finishes its claim under its fence"
}

# The import of a hand-written table (docs/examples/import_idempotency_keys.sql)
# into DB as its owner ROLE, then retries of every kind as the granted role.
lc_import() { # DB OWNER
  local got
  lc_sql "$1" "$2" >/dev/null <<'SQL'
CREATE SCHEMA legacy;
CREATE TABLE legacy.idempotency_keys (key text PRIMARY KEY, request jsonb, request_hash bytea, status text NOT NULL,
                                      response jsonb, created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL);
INSERT INTO legacy.idempotency_keys VALUES
  ('order-1', '{"sku": "a", "qty": 1}', NULL, 'succeeded', '{"order_id": 1}', now() - interval '1 hour', now() + interval '1 day'),
  ('order-2', '{"sku": "b", "qty": 2}', NULL, 'failed', '{"code": "out_of_stock"}', now() - interval '1 hour', now() + interval '1 day'),
  ('order-3', '{"sku": "c", "qty": 3}', NULL, 'started', NULL, now() - interval '1 hour', now() + interval '1 day'),
  ('order-4', NULL, sha256('legacy request bytes'), 'succeeded', '{"order_id": 4}', now() - interval '1 hour', now() + interval '1 day'),
  ('order-5', '{"sku": "e", "qty": 5}', NULL, 'succeeded', '{"order_id": 5}', now() - interval '2 days', now() - interval '1 day'),
  ('  order-6  ', '{"sku": "f"}', NULL, 'succeeded', '{"order_id": 6}', now() - interval '1 hour', now() + interval '1 day');
SQL
  "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$2" -d "$1" -v ns=lc-orders -v old=legacy.idempotency_keys \
    -f docs/examples/import_idempotency_keys.sql >/dev/null || { echo "  FAILED: the import"; return 1; }
  got=$(lc_sql "$1" "$2" <<SQL
SELECT idempotency.idem_grant('lc-orders', '$LC_APP');
SET ROLE $LC_APP;
SELECT kind, result FROM idempotency.idem_begin('lc-orders', 'order-1', '{"qty": 1, "sku": "a"}');
SELECT kind, recorded_request FROM idempotency.idem_begin('lc-orders', 'order-1', '{"qty": 2, "sku": "a"}');
SELECT kind, error FROM idempotency.idem_begin('lc-orders', 'order-2', '{"sku": "b", "qty": 2}');
SELECT kind FROM idempotency.idem_begin('lc-orders', 'order-3', '{"sku": "c", "qty": 3}');
SELECT kind, encode(recorded_hash, 'hex') = encode(sha256('legacy request bytes'), 'hex') FROM idempotency.idem_begin('lc-orders', 'order-4', '{"sku": "d"}');
SELECT kind FROM idempotency.idem_begin('lc-orders', 'order-6', '{"sku": "f"}');
BEGIN;
SELECT kind FROM idempotency.idem_begin('lc-orders', 'order-5', '{"sku": "e", "qty": 5}');
ROLLBACK;
SQL
)
  lc_expect "$got" "t
prior_result|{\"order_id\": 1}
mismatch|{\"qty\": 1, \"sku\": \"a\"}
prior_error|{\"message\": \"{\\\"code\\\": \\\"out_of_stock\\\"}\", \"class_tag\": \"ImportedError\"}
in_flight
mismatch|t
prior_result
fresh" "a retry of an imported record replays (or answers as docs/managed.md says); an expired one is fresh"
}

lc_script() {
  local d=$1 owner=idem_plain rel
  # 1. The plain script, run by a role with CREATE on the database and
  #    nothing else (PostgreSQL 15: public has no CREATE for it).
  psql_su -d postgres -c "DROP DATABASE IF EXISTS idem_lc_plain WITH (FORCE)" -c "DROP DATABASE IF EXISTS idem_lc_plain2 WITH (FORCE)" \
    -c "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$owner') THEN CREATE ROLE $owner LOGIN; END IF; END \$\$" \
    -c "CREATE DATABASE idem_lc_plain TEMPLATE template0" -c "GRANT CREATE ON DATABASE idem_lc_plain TO $owner" \
    -c "GRANT $LC_APP TO $owner" 2>&1 | grep -v NOTICE || true
  lc_expect "$(echo "SELECT rolsuper, rolcreaterole, rolcreatedb, has_schema_privilege('$owner', 'public', 'CREATE') FROM pg_roles WHERE rolname = '$owner'" | lc_sql idem_lc_plain "$owner")" \
    "f|f|f|f" "the installing role is no superuser, creates no role or database, and may not create in public"
  lc_expect "$("$BIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$owner" -d idem_lc_plain -f "$SQL_OUT/idempotency-portable-$VERSION.sql" 2>&1 \
               || echo "psql exited with $?")" \
    "" "the plain script, run by $owner, installs without a word (no result rows, notices or errors)" || return 1
  lc_expect "$(echo 'SELECT edition, version FROM idempotency.idem_version(); SELECT version FROM idempotency_internal.idem_script_version' | lc_sql idem_lc_plain "$owner")" \
    "portable|$VERSION
$VERSION" "the plain script installs the store and its version table"
  lc_expect "$("$BIN/psql" -X -q -U "$owner" -d idem_lc_plain -f "$SQL_OUT/idempotency-portable-$VERSION.sql" 2>&1 | grep -o 'ERROR:.*')" \
    "ERROR:  the idempotency store is already installed in database idem_lc_plain" "a second run is refused, and changes nothing"
  lc_fill_as idem_lc_plain "$owner"
  echo "$LC_STATE_SQL" | lc_sql idem_lc_plain "$owner" >"$d/plain.state"
  # 2. An update in place, by a later release's script (here one made for
  #    the test from script/update-begin.sql and update-end.sql).
  printf "CREATE OR REPLACE FUNCTION idempotency.idem_lifecycle_marker() RETURNS text LANGUAGE sql AS 'SELECT ''updated''';\n" >"$d/fixture.sql"
  rel=$(realpath --relative-to="$REPO/src/sql" "$d/fixture.sql")
  printf 'script:script/update-begin.sql\n%s\nscript:script/update-end.sql\n' "$rel" >"$d/lifecycle.portable"
  src/sql/assemble --script "$d/lifecycle.portable" "$VERSION-lifecycle" "$VERSION" >"$d/update.sql"
  "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$owner" -d idem_lc_plain -f "$d/update.sql" >/dev/null || { echo "  FAILED: the update"; return 1; }
  lc_expect "$(echo 'SELECT version FROM idempotency_internal.idem_script_version; SELECT idempotency.idem_lifecycle_marker()' | lc_sql idem_lc_plain "$owner")" \
    "$VERSION-lifecycle
updated" "a later release's script updates the store in place, and its version table"
  lc_expect "$("$BIN/psql" -X -q -U "$owner" -d idem_lc_plain -f "$d/update.sql" 2>&1 | grep -o 'ERROR:.*')" \
    "ERROR:  this script updates the idempotency store from release $VERSION, not $VERSION-lifecycle" "an update script refuses a store not at the release it updates from"
  echo "$LC_STATE_SQL" | lc_sql idem_lc_plain "$owner" >"$d/plain-updated.state"
  lc_same "$d/plain.state" "$d/plain-updated.state" "the update keeps every record, fence, grant and default"
  # 3. pg_dump and pg_restore of the database's own objects, by the owner,
  #    without the lock secret, which the restored database draws anew.
  "$BIN/pg_dump" -Fc -U "$owner" -d idem_lc_plain --exclude-table-data=idempotency_internal.idem_lock_secret -f "$d/plain.dump"
  psql_su -d postgres -c "CREATE DATABASE idem_lc_plain2 TEMPLATE template0" -c "GRANT CREATE ON DATABASE idem_lc_plain2 TO $owner" >/dev/null
  lc_restore "$d/plain.dump" idem_lc_plain2 "$owner"
  lc_sql idem_lc_plain2 "$owner" <"$REPO/docs/examples/new_lock_secret.sql" >/dev/null
  echo "$LC_STATE_SQL" | lc_sql idem_lc_plain2 "$owner" >"$d/plain-restored.state"
  lc_same "$d/plain.state" "$d/plain-restored.state" "pg_dump and pg_restore keep them (plain script)"
  lc_expect "$(echo 'SELECT encode(secret, $$hex$$) FROM idempotency_internal.idem_lock_secret' | lc_sql idem_lc_plain2 "$owner" | wc -l)|$(
    { echo 'SELECT encode(secret, $$hex$$) FROM idempotency_internal.idem_lock_secret' | lc_sql idem_lc_plain "$owner"
      echo 'SELECT encode(secret, $$hex$$) FROM idempotency_internal.idem_lock_secret' | lc_sql idem_lc_plain2 "$owner"; } | sort -u | wc -l)" \
    "1|2" "the restored database has a lock secret of its own, not the dumped one's"
  LC_OWNER=$owner lc_use idem_lc_plain2 portable
  # 4. A squatted schema: the script refuses to install over it.
  psql_su -d postgres -c "DROP DATABASE IF EXISTS idem_lc_squat WITH (FORCE)" -c "CREATE DATABASE idem_lc_squat TEMPLATE template0" \
    -c "GRANT CREATE ON DATABASE idem_lc_squat TO $owner" 2>&1 | grep -v NOTICE || true
  psql_su -d idem_lc_squat -c "CREATE SCHEMA idempotency" >/dev/null
  lc_expect "$("$BIN/psql" -X -q -U "$owner" -d idem_lc_squat -f "$SQL_OUT/idempotency-portable-$VERSION.sql" 2>&1 | grep -o 'ERROR:.*')" \
    'ERROR:  schema "idempotency" already exists' "a schema of the same name, made by another role first, stops the script"
  # 5. Default privileges the owner set for its new objects give nobody
  #    the store's tables or functions.
  psql_su -d idem_lc_squat -c "DROP SCHEMA idempotency" >/dev/null
  lc_sql idem_lc_squat "$owner" >/dev/null <<'SQL'
ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO PUBLIC;
ALTER DEFAULT PRIVILEGES GRANT ALL ON SEQUENCES TO PUBLIC;
ALTER DEFAULT PRIVILEGES GRANT ALL ON TYPES TO PUBLIC;
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
ALTER DEFAULT PRIVILEGES GRANT ALL ON SCHEMAS TO PUBLIC;
ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO idem_lc_app;
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO idem_lc_app;
SQL
  "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -U "$owner" -d idem_lc_squat -f "$SQL_OUT/idempotency-portable-$VERSION.sql" >/dev/null
  lc_expect "$(lc_sql idem_lc_squat "$owner" <<'SQL'
SELECT count(*) FROM pg_class c WHERE c.relnamespace IN ('idempotency'::regnamespace, 'idempotency_internal'::regnamespace)
  AND (has_table_privilege('public', c.oid, 'INSERT') OR has_table_privilege('public', c.oid, 'UPDATE')
       OR has_table_privilege('public', c.oid, 'DELETE') OR (has_table_privilege('public', c.oid, 'SELECT')
                                                            AND c.relname NOT IN ('idem_caller', 'idem_script_version')));
SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'idempotency_internal'::regnamespace AND p.prosecdef
  AND has_function_privilege('public', p.oid, 'EXECUTE') AND p.proname NOT IN (SELECT unnest(ARRAY[]::name[]));
SELECT has_schema_privilege('public', 'idempotency', 'CREATE'), has_schema_privilege('public', 'idempotency_internal', 'CREATE');
SELECT count(*) FROM pg_class c, aclexplode(c.relacl) a WHERE a.grantee = 'idem_lc_app'::regrole
  AND c.relnamespace IN ('idempotency'::regnamespace, 'idempotency_internal'::regnamespace);
SELECT count(*) FROM pg_proc p, aclexplode(p.proacl) a WHERE a.grantee = 'idem_lc_app'::regrole
  AND p.pronamespace IN ('idempotency'::regnamespace, 'idempotency_internal'::regnamespace);
SQL
)" "0
$(echo "SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'idempotency_internal'::regnamespace AND p.prosecdef AND has_function_privilege('public', p.oid, 'EXECUTE')" | lc_sql idem_lc_plain "$owner")
f|f
0
0" "default privileges of the installing role give PUBLIC, or a role, nothing more than a plain install does"
  # 6. Moving in from a hand-written table.
  lc_import idem_lc_plain "$owner"
}

# lc_fill_as DB ROLE : lc_fill with ROLE as the store's owner.
lc_fill_as() { LC_OWNER=$2 lc_fill "$1"; }

run_lifecycle() {
  local d=$WORK/run-$1/lifecycle
  LC_MODE=$1 LC_FAILED=0
  rm -rf "$d" && mkdir -p "$d" && chmod 777 "$d"
  lc_role
  if [ "$1" = tle ]; then
    lc_tle "$d" || LC_FAILED=1
    lc_import idem_lc_src "$(runner_of tle)" || LC_FAILED=1
  else
    lc_script "$d" || LC_FAILED=1
  fi
  return "$LC_FAILED"
}
