# lib.sh: shell helpers shared by run-demo and run-tests (sourced, not run).
#
# Dependencies come from Debian's packages; a private PostgreSQL cluster runs
# as the invoking user, or as the `postgres` OS user when invoked as root
# (initdb refuses root).

set -euo pipefail

# The PostgreSQL majors the suites run against (make test PG=NN); README.md
# and META.json name the same ones (check-release compares). 15 is Debian
# 12's own and runs every layer; test/bin/pg-major brings the others.
MAJORS=(13 15 17 18 19)
# The majors whose Perl TAP layer runs (make test PG=NN): the oldest and the
# newest stable besides 15; 17 and 19 run the SQL suites only.
PERL_MAJORS=(13 15 18)
# The majors whose portable layer (run-major: the portable edition through
# the plain script, run by an ordinary role) runs its full suites (regress,
# isolation, pgTAP): one older and one newer than 15, which runs them with
# test/bin/portable; the others install it and run pg_regress.
PORTABLE_MAJORS=(13 18)
PGVER=${PGVER:-15}
# Where test/bin/pg-major keeps what it downloads and unpacks (never committed).
PG_MAJORS_DIR=${IDEM_PG_MAJORS_DIR:-/var/tmp/idempotency-pg}
# root_suite NN: the Debian suite whose own binary packages bring major NN,
# for the majors whose packages need a newer libc than Debian 12's: they run
# in a Debian root of that suite (test/bin/pg-major makes it, in_root enters
# it). Empty for the majors installed on this machine itself.
root_suite() {
  case $1 in
    17) echo trixie ;;
    18) echo sid ;;
    19) echo experimental ;;  # a sid root that takes PostgreSQL's packages from experimental
  esac
}
ROOT_SUITE=$(root_suite "$PGVER")
# root_label NN: how messages name that root.
root_label() {
  case $(root_suite "$1") in
    trixie) echo "Debian 13 (trixie) root" ;;
    sid) echo "Debian sid root" ;;
    experimental) echo "Debian sid root with experimental's PostgreSQL $1" ;;
  esac
}
# The root of major NN (each major has its own, so that no major's libraries
# change another's), when this script runs outside it; empty inside a root
# (IDEM_IN_ROOT=1, set by in_root's callers) and for the other majors.
PG_ROOT=
[ -z "$ROOT_SUITE" ] || [ -n "${IDEM_IN_ROOT:-}" ] || PG_ROOT=$PG_MAJORS_DIR/root-$PGVER
# Debian's packages put a major in /usr/lib/postgresql/NN (inside its root
# for the root majors: only run-major and check-package inside it use them).
PG_BIN=/usr/lib/postgresql/$PGVER/bin
# Always this major's: a PG_CONFIG inherited from a script that sourced this
# file for another major (.ci/run does, for 15) would build and install for that one.
export PG_CONFIG=$PG_BIN/pg_config
# Client programs that stand in for the major's own in the Perl TAP tests
# (test/bin/pg-major says which and why); usually absent.
PG_TOOLS=$PG_MAJORS_DIR/tools-$PGVER
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

# Prints those of the Debian packages named that are not installed.
missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

# Installs the Debian packages named, running apt-get only when one is missing
# (and apt-get update once per run: the scripts a run starts inherit the mark).
install_packages() {
  local missing
  mapfile -t missing < <(missing_packages "$@")
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]}"
  if [ -z "${IDEM_APT_UPDATED:-}" ]; then
    as_root apt-get update -qq
    export IDEM_APT_UPDATED=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

BUILD_PACKAGES=(make g++ libssl-dev "postgresql-$PGVER" "postgresql-server-dev-$PGVER")
TEST_PACKAGES=("postgresql-$PGVER-pgtap" libtap-parser-sourcehandler-pgtap-perl libipc-run-perl
               "postgresql-$PGVER-cron" libgtest-dev python3 python3-psycopg clang libclang-rt-14-dev pgbouncer
               libdbd-pg-perl)

# Builds the extension and installs it into the server's directories (make
# run; the tests install into a private copy: private_install).
build_and_install() {
  say "building and installing the extension"
  make -C "$REPO" -s PG_CONFIG="$PG_CONFIG"
  as_root make -C "$REPO" -s install PG_CONFIG="$PG_CONFIG"
}

# run_layer NAME COMMAND...: runs one layer (or step) of a test script and
# records its line for the summary: PASS, FAIL, or SKIP when the command
# exits 77 (its last line of output says why). Each line says how long the
# layer took and how many tests it ran, as the test programs' own closing
# lines count them (pg_regress, prove and pg_prove, GoogleTest), and ends
# with RERUN when set: the command that runs the layer again. When that is
# one of test/bin/check's (make check-regress), a failed layer's line also
# names the command that runs again just the tests that failed.
# summary LABEL prints the lines, appends them to $IDEM_SUMMARY_LOG when set
# (.ci/run collects every layer of every step there), and fails if any failed.
declare -a SUMMARY=()
FAILED=0
SKIP_STATUS=77
run_layer() {
  local name=$1 start=$SECONDS out status counts failed; shift
  say "$name"
  out=$(mktemp)
  set +e
  # A script run as a layer keeps its own summary out of the log: its line here stands for it.
  { unset IDEM_SUMMARY_LOG; "$@"; } 2>&1 | tee "$out"
  status=${PIPESTATUS[0]}
  set -e
  counts=$(test_counts "$out")
  name="$name${counts:+ [$counts]} ($((SECONDS - start)) s)"
  if [ "$status" = 0 ]; then
    SUMMARY+=("PASS  $name${RERUN:+; rerun: $RERUN}")
  elif [ "$status" = "$SKIP_STATUS" ]; then
    SUMMARY+=("SKIP  $name: $(grep -v '^[[:space:]]*$' "$out" | tail -n 1)${RERUN:+; rerun: $RERUN}")
  else
    failed=
    [[ "${RERUN:-}" != "make check-"* ]] || failed=$(failed_tests "$out")
    SUMMARY+=("FAIL  $name${RERUN:+; rerun: $RERUN}${failed:+; just the failed tests: $RERUN T='$failed'}")
    FAILED=$((FAILED + 1))
  fi
  rm -f "$out"
  return 0
}
# test_counts FILE: what the closing lines of the test programs in FILE
# count, joined with "; " (empty when none of them ran).
test_counts() {
  sed -n -E \
    -e 's/^[#[:space:]]*All ([0-9]+) tests passed.*/\1 tests passed/p' \
    -e 's/^[#[:space:]]*([0-9]+) of ([0-9]+) tests failed.*/\1 of \2 tests failed/p' \
    -e 's/^[#[:space:]]*([0-9]+) of ([0-9]+) tests passed, ([0-9]+) failed.*/\3 of \2 tests failed/p' \
    -e 's/^Files=([0-9]+), Tests=([0-9]+),.*/\1 files, \2 tests/p' \
    -e 's/^\[  PASSED  \] ([0-9]+) tests?.*/\1 tests passed/p' "$1" | paste -sd ';' | sed 's/;/; /g'
}
# failed_tests FILE: the names of the tests that failed, as the lines of
# pg_regress and isolationtester (PostgreSQL 15's and 16's formats) and the
# closing report of prove and pg_prove in FILE say, on one line.
failed_tests() {
  sed -n -E \
    -e 's/^(test +| +)?([A-Za-z0-9_]+) +\.\.\. FAILED.*/\2/p' \
    -e 's/^not ok [0-9]+ +[-+] +([A-Za-z0-9_]+) .*/\1/p' \
    -e 's/^([^ ]*\/)?([A-Za-z0-9_]+)\.(pl|sql) +\(Wstat: .*/\2/p' "$1" | awk '!seen[$0]++' | paste -sd ' '
}
# merge_summary FILE: adds the lines another script's summary left in FILE
# (a run inside a Debian root) to this script's.
merge_summary() {
  local line
  [ -f "$1" ] || return 0
  while IFS= read -r line; do
    SUMMARY+=("$line")
    [ "${line#FAIL}" = "$line" ] || FAILED=$((FAILED + 1))
  done <"$1"
}
summary() {
  say "summary"
  printf '  %s\n' "${SUMMARY[@]}"
  [ -z "${IDEM_SUMMARY_LOG:-}" ] || printf '%s\n' "${SUMMARY[@]}" >>"$IDEM_SUMMARY_LOG"
  echo "$1: $(grep -c '^PASS' < <(printf '%s\n' "${SUMMARY[@]}")) passed, $FAILED failed$(
    n=$(grep -c '^SKIP' < <(printf '%s\n' "${SUMMARY[@]}")); [ "$n" = 0 ] || echo ", $n skipped")"
  [ "$FAILED" -eq 0 ]
}

# in_root ROOT VAR=VALUE... COMMAND...: runs COMMAND as root inside the
# Debian root ROOT, with only the environment given, in mount and PID
# namespaces of its own: /proc is mounted there for it alone, and when
# COMMAND ends the kernel ends every process it left behind (a server) and
# drops every mount, whether it passed, failed or was killed.
in_root() {
  local root=$1; shift
  as_root unshare --fork --pid --mount --mount-proc="$root/proc" \
    chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 IDEM_IN_ROOT=1 "$@"
}

# make_var NAME [DIR]: the value of a variable of the Makefile (REGRESS, ISOLATION).
make_var() {
  make -s --no-print-directory -C "${2:-$REPO}" -f Makefile -f - print-var VAR="$1" PG_CONFIG="$PG_CONFIG" \
    <<<'print-var: ; @echo $($(VAR))'
}

# The SQL suites, run from source tree SRC against the server that PG*
# names, with the PostgreSQL whose pg_config is PGCONFIG (run-tests and
# check use their private copy's, sanitize its instrumented copy's). pg_regress and isolation print
# their diffs when they fail, for CI logs. suite_pgtap SRC PGCONFIG
# [NAME...] runs test/pgtap/NAME.sql (all without NAME) in a new database,
# and the store's files among them (BOUND_PGTAP) again on a bound store.
BOUND_PGTAP=(store_transitions store_properties namespace_lease batch_equivalence)
suite_regress() {
  (cd "$1" && make -s installcheck PG_CONFIG="$2" ISOLATION=) || { cat "$1/regression.diffs" 2>/dev/null; return 1; }
}
suite_isolation() {
  (cd "$1" && make -s installcheck PG_CONFIG="$2" REGRESS=) || { cat "$1/output_iso/regression.diffs" 2>/dev/null; return 1; }
}
# suite_regress_alone SRC PGCONFIG OUT [NAME...]: each regression test (the
# Makefile's REGRESS, or those named) alone, in a new database of its own
# (one pg_regress each, its files in OUT/NAME), against the server that PG*
# names: no test may need another's set-up or leftovers. Prints each test's
# line, the diff of each that fails, and a closing count.
suite_regress_alone() {
  local src=$1 bindir pg_regress tests t failed=0
  bindir=$("$2" --bindir)
  pg_regress="$("$2" --pkglibdir)/pgxs/src/test/regress/pg_regress"
  if [ $# -gt 3 ]; then tests=("${@:4}"); else read -r -a tests <<<"$(make_var REGRESS "$src")"; fi
  for t in "${tests[@]}"; do
    rm -rf "${3:?}/$t" && mkdir -p "$3/$t"
    if ! "$pg_regress" --bindir="$bindir" --inputdir="$src" --outputdir="$3/$t" --dbname="idem_alone_$t" "$t" \
        >"$3/$t/log" 2>&1; then
      failed=$((failed + 1))
      grep -E '^(test |(not )?ok [0-9])' "$3/$t/log" || cat "$3/$t/log"
      cat "$3/$t/regression.diffs" 2>/dev/null
    else
      grep -E '^(test |ok [0-9])' "$3/$t/log"
    fi
  done
  if [ "$failed" = 0 ]; then echo "All ${#tests[@]} tests passed."; else echo "$failed of ${#tests[@]} tests failed."; return 1; fi
}
suite_pgtap() {
  local psql tests=() bound=() n
  psql="$("$2" --bindir)/psql"
  for n in "${@:3}"; do tests+=("test/pgtap/$n.sql"); done
  [ ${#tests[@]} -gt 0 ] || tests=(test/pgtap/)
  "$psql" -X -q -d postgres -v ON_ERROR_STOP=1 -c 'SET client_min_messages = warning' \
    -c 'DROP DATABASE IF EXISTS idempotency_tap WITH (FORCE)' -c 'CREATE DATABASE idempotency_tap' >/dev/null
  "$psql" -X -q -d idempotency_tap -v ON_ERROR_STOP=1 \
    -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION dblink' -c 'CREATE EXTENSION idempotency' >/dev/null
  (cd "$1" && pg_prove --ext .sql -d idempotency_tap "${tests[@]}") || return 1
  # The store's tests again, their namespaces bound to a table of the
  # service's (test/pgtap/store.psql).
  for n in "${BOUND_PGTAP[@]}"; do
    [ $# -eq 2 ] || [[ " ${*:3} " == *" $n "* ]] && bound+=("test/pgtap/$n.sql")
  done
  [ ${#bound[@]} -gt 0 ] || return 0
  "$psql" -X -q -d idempotency_tap -v ON_ERROR_STOP=1 \
    -c 'CREATE SCHEMA bound' -c "SELECT idempotency.idem_create_store('bound.records')" >/dev/null
  (cd "$1" && pg_prove --set store=bound.records -d idempotency_tap "${bound[@]}")
}

# suite_perl_tap WORK [SKIP...]: the Perl TAP tests (test/t) but those named
# SKIP, with the PostgreSQL::Test::Cluster of the PostgreSQL whose binaries
# are in PG_BIN. It runs initdb, which refuses root: when we are root, the
# tests run as `postgres` from a copy it owns, in WORK/perl.
suite_perl_tap() {
  case " ${*:2} " in
    *" 013_mixed_libraries.pl "*) ;;
    *) old_release "$1/old-release" || return 1 ;;
  esac
  prove_tree "$1/perl" "$REPO/test/t" "${@:2}"
}

# The commits at which the releases before this one landed (as CI passed
# them): 013_mixed_libraries.pl runs each one's library beside this build's
# in one server. This build serves the schemas of 0.9.x and 1.0.x only.
OLD_RELEASES=(0.9.1:1c7a76524a9c82a7d9eb3a389d879eedf872c0cb 0.9.2:8e82403bfeb43ba999515d1b9140189406daeccc)

# old_release DIR: builds those releases from the git history into
# DIR/VERSION and exports IDEM_OLD_RELEASES ("VERSION:DIR ..."); without the
# history (a PGXN archive, a copy) it says so, and 013 skips (CI sets
# IDEM_REQUIRE_OLD_RELEASE=1: then it fails).
old_release() {
  local dir=$1 release version commit built=()
  unset IDEM_OLD_RELEASES
  for release in "${OLD_RELEASES[@]}"; do
    version=${release%%:*} commit=${release#*:}
    if ! git -c safe.directory="$REPO" -C "$REPO" cat-file -e "$commit^{commit}" 2>/dev/null; then
      echo "Perl TAP: no git history of release $version ($commit) in $REPO: 013_mixed_libraries.pl skips it"
      [ "${IDEM_REQUIRE_OLD_RELEASE:-}" != 1 ] || return 1
      continue
    fi
    rm -rf "${dir:?}/$version" && mkdir -p "$dir/$version"
    git -c safe.directory="$REPO" -C "$REPO" archive "$commit" | tar -x -C "$dir/$version"
    make -s -C "$dir/$version" PG_CONFIG="$PG_CONFIG" >"$dir/$version/build.log" 2>&1 ||
      { tail -n 30 "$dir/$version/build.log"; return 1; }
    built+=("$version:$dir/$version")
  done
  [ "${#built[@]}" = 0 ] || export IDEM_OLD_RELEASES="${built[*]}"
}

# suite_citus WORK [SKIP...]: the Citus layer (test/citus: a coordinator and two
# workers on localhost), where Citus 13 is installed for this PostgreSQL.
# Elsewhere it says it skipped (exit 77), unless IDEM_REQUIRE_CITUS=1 (CI,
# which installs Citus with ../shared/citus/install): then that fails.
suite_citus() {
  local control
  control="$("$PG_BIN/pg_config" --sharedir)/extension/citus.control"
  if ! grep -qs "^default_version = '13\." "$control"; then
    echo "Citus 13 is not installed for PostgreSQL $PGVER ($control); ../shared/citus/install installs it"
    [ "${IDEM_REQUIRE_CITUS:-}" = 1 ] && return 1
    return "$SKIP_STATUS"
  fi
  prove_tree "$1/citus" "$REPO/test/citus" "${@:2}"
}

# prove_tree WORK SOURCE [SKIP...]: the Perl TAP tests of directory SOURCE
# (copied to WORK/t with the modules beside them) but those named SKIP.
prove_tree() {
  local dir=$1 pgxs skip
  pgxs=$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")
  mkdir -p "$dir/t" && cp -r "$2"/. "$dir/t/"
  for skip in "${@:3}"; do rm "$dir/t/$skip"; done
  [ "$(id -u)" = 0 ] && chown -R postgres: "$dir"
  (cd "$dir" && as_server_user env \
    PATH="$PG_TOOLS:$PG_BIN:$PATH" TESTDIR="$dir" IDEM_REPO="$REPO" \
    ${IDEM_LOAD_TRANSACTIONS:+IDEM_LOAD_TRANSACTIONS=$IDEM_LOAD_TRANSACTIONS} \
    ${IDEM_MEMORY_CYCLES:+IDEM_MEMORY_CYCLES=$IDEM_MEMORY_CYCLES} \
    ${IDEM_OLD_RELEASES:+IDEM_OLD_RELEASES="$IDEM_OLD_RELEASES"} \
    ${IDEM_REQUIRE_OLD_RELEASE:+IDEM_REQUIRE_OLD_RELEASE=$IDEM_REQUIRE_OLD_RELEASE} \
    PERL5LIB="$pgxs/test/perl" PG_REGRESS="$pgxs/test/regress/pg_regress" \
    prove t/*.pl) || { cat "$dir"/tmp_check/log/regress_log_* 2>/dev/null | tail -n 60; return 1; }
}

# copy_tree DEST: the repository's tracked and untracked (not ignored) files
# as they are in the work tree, without build products, into DEST: a build
# there tests uncommitted edits and never picks up stale objects (of another
# major, or of another build's flags). The list of files copied goes with
# them (DEST/.copied-files), so that a copy, which has no git (a Debian root
# gets one), can be copied the same way again.
copy_tree() {
  mkdir -p "$1"
  (cd "$REPO" && if [ -f .copied-files ] && ! git rev-parse --git-dir >/dev/null 2>&1; then
     cat .copied-files
   else
     git ls-files -z --cached --others --exclude-standard \
       | xargs -0 sh -c 'for f; do [ -e "$f" ] && [ "$f" != .copied-files ] && printf "%s\0" "$f"; done' sh
   fi) >"$1/.copied-files"
  (cd "$REPO" && tar --null -T "$1/.copied-files" -cf -) | tar -xf - -C "$1"
}

# private_pg_copy ROOT: copies this major's Debian tree (/usr/lib/postgresql/NN
# and /usr/share/postgresql/NN) into ROOT/usr/..., for an extension installed
# there (make install DESTDIR=ROOT, dpkg-deb -x) and a server started from
# ROOT's bin, which loads its libraries and extensions from ROOT (PostgreSQL
# finds them relative to its own executable; checked here). The system's
# directories are left alone.
private_pg_copy() {
  local root=$1
  mkdir -p "$root/usr/lib/postgresql" "$root/usr/share/postgresql"
  cp -a "/usr/lib/postgresql/$PGVER" "$root/usr/lib/postgresql/"
  cp -a "/usr/share/postgresql/$PGVER" "$root/usr/share/postgresql/"
  local config=$root/usr/lib/postgresql/$PGVER/bin/pg_config
  [ "$("$config" --pkglibdir)" = "$root/usr/lib/postgresql/$PGVER/lib" ] \
    || die "the copied pg_config does not report the copy's pkglibdir"
  [ "$("$config" --sharedir)" = "$root/usr/share/postgresql/$PGVER" ] \
    || die "the copied pg_config does not report the copy's sharedir"
}

# private_install ROOT: builds the extension here and installs it into a
# private copy of PostgreSQL $PGVER under ROOT (made once, by
# private_pg_copy, without the extension's files that the system's
# directories held), never into the system's directories: several
# checkouts can test at once. Sets COPY_BIN and COPY_PG_CONFIG (which serves
# installcheck; the build needs the system's, whose headers the copy lacks).
private_install() {
  local root=$1 f
  COPY_BIN=$root/usr/lib/postgresql/$PGVER/bin
  COPY_PG_CONFIG=$COPY_BIN/pg_config
  if [ ! -x "$COPY_BIN/postgres" ]; then
    say "copying PostgreSQL $PGVER into $root"
    rm -rf "$root"
    private_pg_copy "$root"
    rm -f "$root/usr/lib/postgresql/$PGVER/lib/idempotency.so" \
          "$root/usr/share/postgresql/$PGVER/extension/idempotency"[-.]*
  fi
  say "building the extension and installing it into $root"
  if ! { make -C "$REPO" -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" &&
         make -C "$REPO" -s install PG_CONFIG="$PG_CONFIG" DESTDIR="$root"; } >"$root.build.log" 2>&1; then
    cat "$root.build.log"; die "the build failed"
  fi
  # A script deleted from the tree must not linger in the copy.
  for f in "$root/usr/share/postgresql/$PGVER/extension/idempotency"--*.sql; do
    [ -e "$REPO/$(basename "$f")" ] || rm -f "$f"
  done
}

# private_server WORK: the extension installed into a private copy of
# PostgreSQL under WORK/pg, and a server started from it (data in
# WORK/data) on a port of this checkout's, also on 127.0.0.1 for the
# clients that have no Unix sockets (pgJDBC, PgBouncer). PG_BIN becomes the
# copy's, for what starts servers later (the Perl TAP tests, through PATH).
private_server() {
  private_install "$1/pg"
  PG_BIN=$COPY_BIN
  say "starting a private PostgreSQL $PGVER from the copy (data in $1/data)"
  cluster_start "$1/data" "$(free_port)" 127.0.0.1
  loaded_library "$1/pg/usr/lib/postgresql/$PGVER/lib/idempotency.so"
}

# loaded_library SO: a new backend of the server that PG* names loads the
# extension from exactly the file SO (a full path), not another copy.
loaded_library() {
  local maps
  maps=$("$PG_BIN/psql" -X -A -t -q -d postgres -v ON_ERROR_STOP=1 \
    -c "LOAD 'idempotency'" -c "SELECT pg_read_file('/proc/self/maps')")
  grep -q " $1\$" <<<"$maps" || { echo "the backend did not load $1:"; grep idempotency <<<"$maps"; return 1; }
  ! grep '/idempotency\.so$' <<<"$maps" | grep -v " $1\$" || { echo "the backend mapped another idempotency.so"; return 1; }
  echo "the backend loads $1"
}

# Makes dir owned by the server user (when root) and traversable by it.
server_owned_dir() {
  mkdir -p "$1"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$1"; fi
  chmod 700 "$1"
}

# This checkout's own block of 20 TCP ports, from a number derived from its
# path (below 32768, where the kernel picks no ports for outgoing
# connections): the servers and poolers of checkouts that test at once do
# not race for one port.
PORT_BLOCK=$((20000 + $(printf '%s' "$REPO" | cksum | cut -d' ' -f1) % 500 * 20))

# free_port [FIRST]: the first port of this checkout's block, from its
# FIRST'th (1 unless given: test/bin/check's server keeps the 0th), that
# nothing listens on at 127.0.0.1.
free_port() {
  local p
  for p in $(seq $((PORT_BLOCK + ${1:-1})) $((PORT_BLOCK + 19))); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  die "no free port between $((PORT_BLOCK + ${1:-1})) and $((PORT_BLOCK + 19)) (this checkout's)"
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
