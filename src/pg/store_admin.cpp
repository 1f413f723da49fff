// store_admin.cpp: the administration functions' writes to a store, made
// as the store table's owner: purging expired records and removing the
// requests a namespace kept. A table the service owns may have triggers of
// its owner's; run as the extension's owner (a superuser), a delete or an
// update would run them with a superuser's rights. Also the shape check that
// binding a namespace makes (idem_store_problem).
#include "postgres.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "funcapi.h"
#include "utils/timestamp.h"
}

#include "../core/error.hpp"
#include "citus.hpp"
#include "claims.hpp"
#include "extension.hpp"
#include "guard.hpp"
#include "isolate.hpp"
#include "policy.hpp"
#include "backend.hpp"
#include "purge.hpp"
#include "settings.hpp"
#include "shard.hpp"
#include "spi.hpp"
#include "store.hpp"
#include "text.hpp"

using namespace idem;

namespace {

// Whether relid may be handed to these functions: the extension's table
// (NULL) or a table some namespace is bound to, never any other table.
pg::Statement is_bound = {
    "SELECT 1 FROM idempotency.idem_namespace_config c WHERE c.store OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
    "LIMIT 1",
    1,
    {OIDOID},
    nullptr,
    true};

// Argument argno, a store (NULL: the extension's table, InvalidOid), after
// checking it is one: raises 42809 for a table no namespace is bound to.
Oid bound_arg(FunctionCallInfo fcinfo, int argno) {
  pg::require_trusted_settings();
  const Oid relid = PG_ARGISNULL(argno) ? InvalidOid : PG_GETARG_OID(argno);
  const Datum values[1] = {ObjectIdGetDatum(relid)};
  if (OidIsValid(relid) && pg::execute(is_bound, values, " ") == 0)
    throw core::Error(core::sqlstate::wrong_object_type,
                      "relation with OID " + std::to_string(relid) + " is not an idempotency store",
                      "No idempotency namespace is bound to it.");
  return relid;
}

// The store of argument argno (bound_arg), opened and locked in mode
// (for writing unless given): for a table Citus distributes, its shell
// (distributed is then set).
pg::Store store_arg(FunctionCallInfo fcinfo, int argno, const text* ns, bool* distributed,
                    LOCKMODE mode = RowExclusiveLock) {
  return pg::open_whole_store(ns, bound_arg(fcinfo, argno), mode, distributed);
}

// Each namespace's lease, as purge needs them: namespaces and seconds.
pg::Statement leases = {
    "SELECT pg_catalog.array_agg(c.namespace),"
    " pg_catalog.array_agg(pg_catalog.date_part('epoch', c.in_progress_lease))"
    " FROM idempotency.idem_namespace_config c WHERE c.in_progress_lease IS NOT NULL",
    0,
    {},
    nullptr,
    true};

// A namespace's records (or those in progress) in a store.
const pg::StoreStatement count_records = {
    "SELECT pg_catalog.count(*) FROM @store@ r WHERE r.namespace OPERATOR(pg_catalog.=) $1"
    " AND ($2 IS FALSE OR r.status OPERATOR(pg_catalog.=) 'in_progress')",
    2,
    {TEXTOID, BOOLOID}};

// What idem_namespace_stats shows of a store, one object per namespace;
// and for idem_metrics, how long the oldest in_progress record has gone
// without its holder's claim, takeover or heartbeat (updated_at), and how
// many records were taken over (attempt above 1).
const pg::StoreStatement store_stats = {
    "SELECT pg_catalog.jsonb_agg(s) FROM (SELECT r.namespace,"
    " pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'in_progress') AS in_progress,"
    " pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'committed') AS committed,"
    " pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'failed') AS failed,"
    " pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(r.created_at)"
    "   FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'in_progress') AS oldest_in_progress_age,"
    " pg_catalog.count(*) FILTER (WHERE r.expires_at OPERATOR(pg_catalog.<) pg_catalog.now()) AS expired,"
    " pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(r.expires_at)"
    "   FILTER (WHERE r.expires_at OPERATOR(pg_catalog.<) pg_catalog.now()) AS oldest_expired_age,"
    " pg_catalog.sum(pg_catalog.pg_column_size(r.*))::pg_catalog.int8 AS row_bytes,"
    " pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(r.updated_at)"
    "   FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'in_progress') AS oldest_in_progress_idle,"
    " pg_catalog.count(*) FILTER (WHERE r.attempt OPERATOR(pg_catalog.>) 1) AS taken_over"
    " FROM @store@ r GROUP BY r.namespace) s",
    0,
    {}};

const pg::StoreStatement forget_requests = {
    "UPDATE @store@ r SET request_payload = NULL"
    " WHERE r.namespace OPERATOR(pg_catalog.=) $1 AND r.request_payload IS NOT NULL",
    1,
    {TEXTOID}};

// One purge chunk of a store, as idem_store_purge runs it (isolated).
struct PurgeChunk {
  FunctionCallInfo fcinfo;
  int32 batch;
  int64 purged;
};

void purge_one_chunk(void* arg) {
  auto& c = *static_cast<PurgeChunk*>(arg);
  text* none = cstring_to_text("");
  bool distributed;
  const pg::Store store = store_arg(c.fcinfo, 0, none, &distributed);
  Datum rows[2];
  bool nulls[2] = {true, true};
  (void)pg::execute(leases, nullptr, "", rows, nulls);
  // Namespaces without a lease of their own have the defaults'.
  const pg::Leases given{nulls[0] ? 0 : rows[0], nulls[1] ? 0 : rows[1],
                         static_cast<double>(pg::namespace_defaults().lease_us) / USECS_PER_SEC};
  if (!distributed) {
    c.purged = store.backend->purge(store, c.batch, given);
    return;
  }
  // A store Citus distributes: the chunk from the shards on this node, each
  // under the lock a move of it waits for (idem_purge runs on every node).
  c.purged = 0;
  List* shards = pg::local_shards(store.table);
  for (int i = 0; i < list_length(shards) && c.purged < c.batch; ++i) {
    const pg::Store shard =
        pg::open_store(none, list_nth_oid(shards, i), RowExclusiveLock, pg::Call{nullptr, false, "purge"});
    c.purged += shard.backend->purge(shard, c.batch - static_cast<int32>(c.purged), given);
  }
}

// The figures of idem_namespace_stats for a store, as idem_store_stats reads them (isolated).
struct StatsRead {
  FunctionCallInfo fcinfo;
  Datum figures;
  bool none;
};

void read_store_stats(void* arg) {
  auto& r = *static_cast<StatsRead*>(arg);
  text* none = cstring_to_text("");
  bool distributed;
  const pg::Store store = store_arg(r.fcinfo, 0, none, &distributed, AccessShareLock);
  (void)pg::execute(store_stats, store, nullptr, "", &r.figures, &r.none);
}

}  // namespace

// idem_store_purge(store regclass, batch_size integer): deletes one chunk
// of up to batch_size expired records from store (NULL: the extension's
// table), as idem_purge describes, as the store's owner; returns how many,
// or NULL when the store failed (its triggers, row security or privileges)
// or ran past idempotency.maintenance_timeout: the chunk is undone, the
// store reported and counted, and idem_purge goes on with the next store.
IDEM_FUNCTION(idem_store_purge_1_0) {
  const int32 batch = PG_ARGISNULL(1) ? 0 : PG_GETARG_INT32(1);
  if (batch < 1)
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid purge batch size",
                      "batch_size must be a positive integer.");
  const Oid relid = bound_arg(fcinfo, 0);
  PurgeChunk c{fcinfo, batch, 0};
  if (!pg::isolated(purge_one_chunk, &c, relid, "purge")) PG_RETURN_NULL();
  PG_RETURN_INT64(c.purged);
}

// idem_store_forget_requests(store regclass, namespace text): removes the
// requests the namespace's records kept in store (NULL: the extension's
// table), as the store's owner; returns how many records had one.
IDEM_FUNCTION(idem_store_forget_requests_1_0) {
  text* ns = pg::namespace_arg(fcinfo, 1);
  bool distributed;  // then the statement runs on the shell, and Citus on every shard
  const pg::Store store = store_arg(fcinfo, 0, ns, &distributed);
  const Datum values[1] = {PointerGetDatum(ns)};
  PG_RETURN_INT64(static_cast<int64>(pg::execute(forget_requests, store, values, " ")));
}

// idem_trusted_settings(): raises 55P02 when this session's settings were
// refused when the library loaded (settings.hpp); the registry functions
// that read a setting call it first.
IDEM_FUNCTION(idem_trusted_settings) {
  (void)fcinfo;
  pg::require_trusted_settings();
  PG_RETURN_VOID();
}

// idem_store_problem(store regclass, OUT problem text, OUT fix text): what
// is wrong with the table as a store (NULLs: nothing), and for an older
// shape the ALTER TABLE that fixes it (idem_bind_store's detail and hint).
IDEM_FUNCTION(idem_store_problem_1_0) {
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    throw core::Error(core::sqlstate::internal_error, "idem_store_problem must return a record");
  Datum values[2] = {0, 0};
  bool nulls[2] = {true, true};
  if (!PG_ARGISNULL(0)) {
    const pg::ShapeProblem p = pg::store_shape_problem(PG_GETARG_OID(0));
    if (p.problem != nullptr) values[0] = PointerGetDatum(cstring_to_text(p.problem)), nulls[0] = false;
    if (p.fix != nullptr) values[1] = PointerGetDatum(cstring_to_text(p.fix)), nulls[1] = false;
  }
  PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

namespace {

// A namespace's records in a table no longer of a store's shape (its owner
// made it unlogged, changed an index...), which an operator unbinding the
// namespace must still count: through SQL as the owner, whatever else the
// shape, by the namespace column when it has one, else every row.
int64 count_in_broken_store(Oid relid, text* ns) {
  static const pg::StoreStatement by_namespace = {
      "SELECT pg_catalog.count(*) FROM @store@ r WHERE r.namespace::pg_catalog.text OPERATOR(pg_catalog.=) $1", 1,
      {TEXTOID}};
  static const pg::StoreStatement every_row = {"SELECT pg_catalog.count(*) FROM @store@ r", 0, {}};
  pg::Store store{};
  store.table = relid;
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
  if (!HeapTupleIsValid(tuple)) return 0;  // dropped meanwhile: it holds none
  store.owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
  ReleaseSysCache(tuple);
  const Datum values[1] = {PointerGetDatum(ns)};
  Datum row[1];
  bool nulls[1] = {true};
  const AttrNumber column = get_attnum(relid, "namespace");
  (void)pg::execute(column != InvalidAttrNumber ? by_namespace : every_row, store, values, " ", row, nulls);
  return nulls[0] ? 0 : DatumGetInt64(row[0]);
}

}  // namespace

// idem_store_count(store regclass, namespace text, in_progress_only
// boolean): how many records (or records in progress) the namespace has in
// store (NULL: the extension's table), read as the store's owner: a
// SECURITY DEFINER read would run whatever the owner made of the table
// (a rule, a view) with the extension owner's rights. A store that was
// dropped holds none.
IDEM_FUNCTION(idem_store_count_1_0) {
  text* ns = pg::namespace_arg(fcinfo, 1);
  if (!PG_ARGISNULL(0) && !SearchSysCacheExists1(RELOID, PG_GETARG_DATUM(0))) PG_RETURN_INT64(0);
  if (!PG_ARGISNULL(0) && pg::store_shape_problem(PG_GETARG_OID(0)).problem != nullptr)
    PG_RETURN_INT64(count_in_broken_store(bound_arg(fcinfo, 0), ns));
  bool distributed;
  const pg::Store store = store_arg(fcinfo, 0, ns, &distributed, AccessShareLock);
  const Datum values[2] = {PointerGetDatum(ns), BoolGetDatum(!PG_ARGISNULL(2) && PG_GETARG_BOOL(2))};
  Datum row[1];
  bool nulls[1] = {true};
  (void)pg::execute(count_records, store, values, "  ", row, nulls);
  // This transaction's claims without a row are records in progress too.
  const int64 held = store.own ? pg::open_held_claims(ns) : 0;
  PG_RETURN_INT64((nulls[0] ? 0 : DatumGetInt64(row[0])) + held);
}

// idem_store_stats(store regclass): idem_namespace_stats's figures for
// each namespace in store (NULL: the extension's table), as a jsonb array,
// read as the store's owner (see idem_store_count); NULL when it has no
// records, or when the read failed or ran too long (isolated, as a purge
// chunk is). The symbol is 0.7.0's, whose figures include oldest_expired_age.
IDEM_FUNCTION(idem_store_stats_1_0) {
  const Oid relid = bound_arg(fcinfo, 0);
  StatsRead r{fcinfo, 0, true};
  if (!pg::isolated(read_store_stats, &r, relid, "statistics read") || r.none) PG_RETURN_NULL();
  PG_RETURN_DATUM(r.figures);
}

// idem_store_distribution(store regclass): how Citus distributes the table:
// NULL when it does not (or Citus is not here), 'key_value' or 'namespace'
// for a table hash-distributed by that column, 'other' for any other kind
// (which the store refuses).
IDEM_FUNCTION(idem_store_distribution) {
  if (PG_ARGISNULL(0) || !pg::citus_installed()) PG_RETURN_NULL();
  const pg::CitusTable t = pg::citus_table(PG_GETARG_OID(0));
  if (t.method == '\0') PG_RETURN_NULL();
  const AttrNumber routing = pg::store_routing(t);
  const char* kind = routing == pg::col_namespace ? "namespace" : routing == pg::col_key_value ? "key_value" : "other";
  PG_RETURN_TEXT_P(cstring_to_text(kind));
}

// The symbols 0.9's scripts name, for a schema not yet updated (1.0.0's
// names are new: they read idem_defaults, which no older library does).
IDEM_FUNCTION(idem_store_purge) { return idem_store_purge_1_0_body(fcinfo); }
IDEM_FUNCTION(idem_store_forget_requests) { return idem_store_forget_requests_1_0_body(fcinfo); }
IDEM_FUNCTION(idem_store_problem) { return idem_store_problem_1_0_body(fcinfo); }
IDEM_FUNCTION(idem_store_count) { return idem_store_count_1_0_body(fcinfo); }
IDEM_FUNCTION(idem_store_stats_0_7) { return idem_store_stats_1_0_body(fcinfo); }
