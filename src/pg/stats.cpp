// stats.cpp: the counters in shared memory and the SQL functions that read
// and reset them (idem_stats_counters, idem_stats_reset) and that the purge
// reports to (idem_stats_count_purged).
//
// As in pg_stat_statements, the memory exists only when the library is in
// shared_preload_libraries; otherwise every count is a no-op and
// idem_stats_counters says the counters are off. Counters are 64-bit atomics
// added to without a lock: a begin costs one atomic add. They count calls,
// including calls whose transaction later rolls back.
#include "stats.hpp"

extern "C" {
#include "access/htup_details.h"
#include "funcapi.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
}

#include "../core/error.hpp"
#include "compat.hpp"
#include "guard.hpp"

namespace idem::pg {

bool track_counters = true;

namespace {

struct SharedCounters {
  pg_atomic_uint64 values[counter_count];
  pg_atomic_uint64 reset_at;  // a TimestampTz
};

SharedCounters* shared = nullptr;
shmem_startup_hook_type previous_startup = nullptr;

// Finds (or, in the postmaster, creates and zeroes) the counters.
void attach_memory() {
  if (previous_startup) previous_startup();
  bool found = false;
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  shared = static_cast<SharedCounters*>(ShmemInitStruct("idempotency counters", sizeof(SharedCounters), &found));
  if (!found) {
    for (pg_atomic_uint64& v : shared->values) pg_atomic_init_u64(&v, 0);
    pg_atomic_init_u64(&shared->reset_at, static_cast<uint64>(GetCurrentTimestamp()));
  }
  attach_namespace_stats();
  LWLockRelease(AddinShmemInitLock);
}

}  // namespace

void count(Counter c, uint64 n) {
  if (shared != nullptr && track_counters) pg_atomic_fetch_add_u64(&shared->values[c], n);
}

void count_begin(const text* ns, int kind) {
  if (shared == nullptr || !track_counters) return;
  pg_atomic_fetch_add_u64(&shared->values[begin_fresh + kind], 1);
  count_begin_in(ns, kind);
}

// The server's counters and the namespaces' (namespace_stats.cpp), with
// the lock the namespaces' table is guarded by.
Size stats_bytes() { return MAXALIGN(sizeof(SharedCounters)) + namespace_stats_bytes(); }

void request_stats_memory() {
  compat::request_shmem(stats_bytes, "idempotency namespaces", 1);
  previous_startup = shmem_startup_hook;
  shmem_startup_hook = attach_memory;
}

}  // namespace idem::pg

using idem::pg::shared;

// The counters as one row: counters_on, then one bigint per counter in the
// order of enum Counter up to purged_rows (the row 0.3.0 defined), then
// stats_reset. With the counters off, every column after counters_on is NULL.
IDEM_FUNCTION(idem_stats_counters) {
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    throw idem::core::Error(idem::core::sqlstate::internal_error, "idem_stats_counters must return a row");
  constexpr int in_row = idem::pg::purged_rows + 1;
  constexpr int columns = in_row + 2;
  if (desc->natts != columns)
    throw idem::core::Error(idem::core::sqlstate::internal_error, "idem_stats_counters has the wrong columns",
                            "Run ALTER EXTENSION idempotency UPDATE.");
  Datum values[columns];
  bool nulls[columns];
  values[0] = BoolGetDatum(shared != nullptr), nulls[0] = false;
  for (int i = 1; i < columns; ++i) values[i] = 0, nulls[i] = shared == nullptr;
  if (shared != nullptr) {
    for (int c = 0; c < in_row; ++c)
      values[c + 1] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&shared->values[c])));
    values[columns - 1] = TimestampTzGetDatum(static_cast<TimestampTz>(pg_atomic_read_u64(&shared->reset_at)));
  }
  return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
}

// Sets every counter back to zero, the namespaces' too (which are
// forgotten), and stats_reset to now. Counts that race with the reset land
// on either side of it.
IDEM_FUNCTION(idem_stats_reset) {
  (void)fcinfo;
  if (shared == nullptr)
    throw idem::core::Error(idem::core::sqlstate::object_not_in_prerequisite_state, "idempotency counters are off",
                            "The counters need the library in shared_preload_libraries.");
  for (pg_atomic_uint64& v : shared->values) pg_atomic_write_u64(&v, 0);
  idem::pg::reset_namespace_stats();
  pg_atomic_write_u64(&shared->reset_at, static_cast<uint64>(GetCurrentTimestamp()));
  PG_RETURN_VOID();
}

// idem_stats_released_keys(): how many keys idem_release_key released
// (NULL when the counters are off), for idem_stats.
IDEM_FUNCTION(idem_stats_released_keys) {
  (void)fcinfo;
  if (shared == nullptr) PG_RETURN_NULL();
  PG_RETURN_INT64(static_cast<int64>(pg_atomic_read_u64(&shared->values[idem::pg::released_keys])));
}

// idem_stats_stores_skipped(): how many times purge or the statistics
// skipped a store whose own triggers, row security or privileges made it
// fail, or that ran past idempotency.maintenance_timeout (NULL when the
// counters are off), for idem_stats.
IDEM_FUNCTION(idem_stats_stores_skipped) {
  (void)fcinfo;
  if (shared == nullptr) PG_RETURN_NULL();
  PG_RETURN_INT64(static_cast<int64>(pg_atomic_read_u64(&shared->values[idem::pg::stores_skipped])));
}

// idem_stats_recovery(): how many begins took an abandoned claim over, and
// how many recovery points holders recorded (NULLs when the counters are
// off), for idem_stats.
IDEM_FUNCTION(idem_stats_recovery) {
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    throw idem::core::Error(idem::core::sqlstate::internal_error, "idem_stats_recovery must return a record");
  Datum values[2] = {0, 0};
  bool nulls[2] = {true, true};
  if (shared != nullptr) {
    values[0] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&shared->values[idem::pg::takeovers])));
    values[1] = Int64GetDatum(static_cast<int64>(pg_atomic_read_u64(&shared->values[idem::pg::recovery_points])));
    nulls[0] = nulls[1] = false;
  }
  return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
}

// Internal, for idem_purge: adds the rows it deleted to purged_rows.
IDEM_FUNCTION(idem_stats_count_purged) {
  if (!PG_ARGISNULL(0) && PG_GETARG_INT64(0) > 0)
    idem::pg::count(idem::pg::purged_rows, static_cast<uint64>(PG_GETARG_INT64(0)));
  PG_RETURN_VOID();
}
