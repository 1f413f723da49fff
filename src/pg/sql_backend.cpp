// sql_backend.cpp: a store's writes as SQL statements, kept per table and
// run as its owner (spi.hpp): the backend of every store that is not
// exactly as the install scripts make the extension's table (a trigger,
// rule, row security, CHECK or index an operator or a service added, or a
// shard Citus keeps), whose additions the statements honour. Also the two
// writes both backends make through SQL: a takeover and a heartbeat. Every
// statement names its objects and operators with their schema.
#include "backend.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

#include "../core/error.hpp"
#include "fence.hpp"
#include "purge.hpp"
#include "stats.hpp"
#include "spi.hpp"
#include "store.hpp"
#include "text.hpp"
#include "write.hpp"

namespace idem::pg {

namespace {

#define BY_KEY " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2"
#define IN_PROGRESS " AND status OPERATOR(pg_catalog.=) 'in_progress'"

// The fresh in_progress record, claimed at $6 (the clock when the key was
// claimed, not the transaction's start), with the fence drawn for it ($7).
// Every column is named, as the direct write does, so that a default an
// operator adds never makes the two backends write different rows.
const StoreStatement insert_in_progress = {
    "INSERT INTO @store@ (namespace, key_value, status, request_hash, request_payload, created_at, updated_at,"
    " expires_at, result_payload, error_payload, attempt, fence, recovery_point, recovery_state)"
    " VALUES ($1, $2, 'in_progress', $3, $4, $6, $6, $6 OPERATOR(pg_catalog.+) $5, NULL, NULL, 1, $7, NULL, NULL)",
    7,
    {TEXTOID, TEXTOID, BYTEAOID, JSONBOID, INTERVALOID, TIMESTAMPTZOID, INT8OID}};

// The finished record of a claim held by its lock alone, finished now.
const StoreStatement insert_finished_record = {
    "INSERT INTO @store@ (namespace, key_value, status, request_hash, request_payload, result_payload,"
    " error_payload, created_at, updated_at, expires_at, attempt, fence, recovery_point, recovery_state)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, pg_catalog.clock_timestamp(), $9, 1, $10, NULL, NULL)",
    10,
    {TEXTOID, TEXTOID, TEXTOID, BYTEAOID, JSONBOID, JSONBOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}};

// A claim finished: its updated_at is the clock when it was finished.
#define FINISH                                                                                         \
  "UPDATE @store@ SET status = $3, result_payload = $4, error_payload = $5,"                           \
  " updated_at = pg_catalog.clock_timestamp()" BY_KEY IN_PROGRESS
const StoreStatement finish_any = {FINISH, 5, {TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID}};
const StoreStatement finish_fenced = {FINISH " AND fence OPERATOR(pg_catalog.=) $6", 6,
                                      {TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, INT8OID}};

// A claim forgotten, unless its work may have had effects: taken over (an
// earlier attempt may have acted) or with a recovery point (its holder
// said it did); a retry that started over would repeat them.
#define FORGET \
  "DELETE FROM @store@" BY_KEY IN_PROGRESS " AND attempt OPERATOR(pg_catalog.=) 1 AND recovery_point IS NULL"
const StoreStatement forget_any = {FORGET, 2, {TEXTOID, TEXTOID}};
const StoreStatement forget_fenced = {FORGET " AND fence OPERATOR(pg_catalog.=) $3", 3, {TEXTOID, TEXTOID, INT8OID}};

// Why forgetting matched nothing: the attempt and recovery point of the
// in_progress record the proof names.
#define KEPT "SELECT attempt, recovery_point FROM @store@" BY_KEY IN_PROGRESS
const StoreStatement kept_any = {KEPT, 2, {TEXTOID, TEXTOID}};
const StoreStatement kept_fenced = {KEPT " AND fence OPERATOR(pg_catalog.=) $3", 3, {TEXTOID, TEXTOID, INT8OID}};

// Takes over the in_progress record the look saw (the version claimed at
// $5): the next attempt, claimed at $4, with the new claim's fence ($6);
// answers the recovery point the record had, which the new attempt resumes
// after. The row is locked with SKIP LOCKED, so a takeover never waits for
// another transaction (a late worker finishing the record) while it holds
// the key's lock; it then matches nothing, as when the record changed.
const StoreStatement take_over_statement = {
    "UPDATE @store@ SET attempt = attempt OPERATOR(pg_catalog.+) 1, updated_at = $4,"
    " expires_at = $4 OPERATOR(pg_catalog.+) $3, fence = $6"
    " WHERE ctid OPERATOR(pg_catalog.=) (SELECT ctid FROM @store@" BY_KEY IN_PROGRESS
    "   AND updated_at OPERATOR(pg_catalog.=) $5 FOR UPDATE SKIP LOCKED)"
    " RETURNING attempt, recovery_point, recovery_state",
    6,
    {TEXTOID, TEXTOID, INTERVALOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}};

// A heartbeat of a claim under a lease: its lease runs again from the
// clock, only while the record is still the claim that drew the fence. Its
// replay window moves with it (the claim's window, expires_at less
// updated_at, from now): a record finished after its window had passed
// would be purged at once, and its retry answered fresh. The second form
// records a recovery point ($4) and its state ($5) too.
#define EXTEND(SET_POINT)                                                                                  \
  "UPDATE @store@ SET updated_at = pg_catalog.clock_timestamp()," SET_POINT                                 \
  " expires_at = GREATEST(expires_at,"                                                                      \
  " pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) (expires_at OPERATOR(pg_catalog.-) updated_at))"    \
  BY_KEY IN_PROGRESS " AND fence OPERATOR(pg_catalog.=) $3 RETURNING updated_at"
const StoreStatement extend_statement = {EXTEND(""), 3, {TEXTOID, TEXTOID, INT8OID}};
const StoreStatement save_point_statement = {EXTEND(" recovery_point = $4, recovery_state = $5,"), 5,
                                             {TEXTOID, TEXTOID, INT8OID, TEXTOID, JSONBOID}};

// Up to $1 expired records, oldest first, but for an in_progress record
// whose lease (its namespace's, $2/$3, else the defaults', $4 seconds)
// still runs: a lease is a length of time, as begin counts it, never a
// calendar step in the purger's time zone. SKIP LOCKED: a row another
// transaction holds is neither waited for nor deleted.
const StoreStatement purge_statement = {
    "WITH doomed AS ("
    " SELECT r.ctid FROM @store@ r"
    " WHERE r.expires_at OPERATOR(pg_catalog.<) pg_catalog.now()"
    "   AND (r.status OPERATOR(pg_catalog.<>) 'in_progress'"
    "        OR pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) r.updated_at)"
    "           OPERATOR(pg_catalog.>=) COALESCE("
    "             (SELECT l.lease FROM ROWS FROM (pg_catalog.unnest($2::pg_catalog.text[]),"
    "                                             pg_catalog.unnest($3::pg_catalog.float8[])) AS l(namespace, lease)"
    "              WHERE l.namespace OPERATOR(pg_catalog.=) r.namespace), $4))"
    " ORDER BY r.expires_at LIMIT $1 FOR UPDATE OF r SKIP LOCKED),"
    " gone AS (DELETE FROM @store@ r USING doomed d WHERE r.ctid OPERATOR(pg_catalog.=) d.ctid"
    "          RETURNING r.namespace::pg_catalog.text AS namespace)"
    " SELECT COALESCE(pg_catalog.sum(g.n), 0)::pg_catalog.int8, pg_catalog.array_agg(g.namespace),"
    "        pg_catalog.array_agg(g.n)"
    " FROM (SELECT gone.namespace, pg_catalog.count(*) AS n FROM gone GROUP BY gone.namespace) g",
    4,
    {INT4OID, TEXTARRAYOID, FLOAT8ARRAYOID, FLOAT8OID}};

// Raises 55000 when the store's own INSERT wrote no row: a BEFORE INSERT
// trigger returned NULL, or a rule of its owner's did something else. The
// claim (or finished record) would otherwise be answered as made, and a
// retry find nothing: a second effect.
void require_inserted(uint64 rows, text* ns, const char* what) {
  if (rows == 1) return;
  throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                    std::string("cannot ") + what + " an idempotency key: its store skipped the insert",
                    "The store of namespace \"" + string_of(ns) +
                        "\" inserted no row for the record: a BEFORE INSERT trigger on the table returned NULL, or "
                        "a rule of its owner's replaced the INSERT.",
                    "A store's BEFORE INSERT triggers must return the row (NEW) for the store's own inserts.");
}

int64 claim(const Store& store, text* ns, text* key, Datum request_hash, Jsonb* request, TimestampTz now,
            Interval* window) {
  const int64 fence = draw_fence();
  const Datum values[7] = {PointerGetDatum(ns),      PointerGetDatum(key),       request_hash,
                           PointerGetDatum(request), IntervalPGetDatum(window), TimestampTzGetDatum(now),
                           Int64GetDatum(fence)};
  require_inserted(execute(insert_in_progress, store, values, request != nullptr ? "       " : "   n   "), ns,
                   "begin");
  return fence;
}

void insert_finished(const Store& store, text* ns, text* key, const HeldClaim& held, bool committing,
                     Jsonb* payload, bool keep_request) {
  const Datum values[10] = {PointerGetDatum(ns),
                            PointerGetDatum(key),
                            CStringGetTextDatum(committing ? "committed" : "failed"),
                            PointerGetDatum(held.request_hash),
                            PointerGetDatum(held.request),
                            PointerGetDatum(payload),
                            PointerGetDatum(payload),
                            TimestampTzGetDatum(held.claimed_at),
                            TimestampTzGetDatum(held.expires_at),
                            Int64GetDatum(held.fence)};
  char nulls[11] = "          ";
  nulls[4] = held.request == nullptr || !keep_request ? 'n' : ' ';
  nulls[committing ? 6 : 5] = 'n';
  require_inserted(execute(insert_finished_record, store, values, nulls), ns, committing ? "commit" : "fail");
}

// A statement cannot tell this transaction's claim from another's: without
// a proof, it acts only on a record claimed_here says is this transaction's.
bool finish(const Store& store, text* ns, text* key, const Claim& proof, bool committing, Jsonb* payload) {
  if (proof.kind == Claim::none && !claimed_here(store, ns, key)) return false;
  const Datum values[6] = {PointerGetDatum(ns),      PointerGetDatum(key),     CStringGetTextDatum(committing ? "committed" : "failed"),
                           PointerGetDatum(payload), PointerGetDatum(payload), Int64GetDatum(proof.value)};
  const char* nulls = committing ? "    n " : "   n  ";
  return execute(proof.kind == Claim::fence ? finish_fenced : finish_any, store, values, nulls) > 0;
}

Forgot forget(const Store& store, text* ns, text* key, const Claim& proof) {
  if (proof.kind == Claim::none && !claimed_here(store, ns, key)) return {Forgot::nothing, 0, nullptr};
  const Datum values[3] = {PointerGetDatum(ns), PointerGetDatum(key), Int64GetDatum(proof.value)};
  const bool fenced = proof.kind == Claim::fence;
  if (execute(fenced ? forget_fenced : forget_any, store, values, "   ") > 0) return {Forgot::forgotten, 0, nullptr};
  Datum why[2];
  bool none[2] = {true, true};
  execute(fenced ? kept_fenced : kept_any, store, values, "   ", why, none);
  if (none[0] || (DatumGetInt32(why[0]) <= 1 && none[1])) return {Forgot::nothing, 0, nullptr};
  return {Forgot::kept, DatumGetInt32(why[0]), none[1] ? nullptr : text_to_cstring(DatumGetTextPP(why[1]))};
}

int64 purge(const Store& store, int32 batch, const Leases& leases) {
  const Datum values[4] = {Int32GetDatum(batch), leases.namespaces, leases.seconds, Float8GetDatum(leases.server)};
  const char nulls[5] = {' ', leases.namespaces == 0 ? 'n' : ' ', leases.seconds == 0 ? 'n' : ' ', ' ', '\0'};
  Datum row[3];
  bool row_nulls[3] = {true, true, true};
  (void)execute(purge_statement, store, values, nulls, row, row_nulls);
  if (row_nulls[0]) return 0;
  // How many of each namespace: its purged_rows counter.
  if (!row_nulls[1] && !row_nulls[2]) {
    Datum *names, *counts;
    int n, m;
    deconstruct_array(DatumGetArrayTypeP(row[1]), TEXTOID, -1, false, TYPALIGN_INT, &names, nullptr, &n);
    deconstruct_array(DatumGetArrayTypeP(row[2]), INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &counts,
                      nullptr, &m);
    for (int i = 0; i < n && i < m; ++i)
      count_in(DatumGetTextPP(names[i]), ns_purged_rows, static_cast<uint64>(DatumGetInt64(counts[i])));
  }
  return DatumGetInt64(row[0]);
}

}  // namespace

const Backend sql_backend = {claim, insert_finished, finish, forget, purge};

TakenOver take_over(const Store& store, text* ns, text* key, Interval* window, TimestampTz now, TimestampTz version,
                    int64 fence) {
  const Datum values[6] = {PointerGetDatum(ns),      PointerGetDatum(key),        IntervalPGetDatum(window),
                           TimestampTzGetDatum(now), TimestampTzGetDatum(version), Int64GetDatum(fence)};
  Datum row[3];
  bool none[3] = {true, true, true};
  execute(take_over_statement, store, values, "      ", row, none);
  if (none[0]) return TakenOver{false, 0, 0, 0, true, true};
  return TakenOver{true, DatumGetInt32(row[0]), row[1], row[2], none[1], none[2]};
}

TimestampTz extend_claim(const Store& store, text* ns, text* key, int64 fence, text* point, Jsonb* state) {
  const Datum values[5] = {PointerGetDatum(ns), PointerGetDatum(key), Int64GetDatum(fence), PointerGetDatum(point),
                           PointerGetDatum(state)};
  Datum updated;
  bool none = true;
  const uint64 done = point != nullptr ? execute(save_point_statement, store, values, state != nullptr ? "     " : "    n",
                                                 &updated, &none)
                                       : execute(extend_statement, store, values, "   ", &updated, &none);
  return done == 0 || none ? 0 : DatumGetTimestampTz(updated);
}

}  // namespace idem::pg
