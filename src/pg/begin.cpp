// begin.cpp: idem_begin(namespace, key, request, replay_window), the entry
// of the store: fresh, in_flight, prior_result, prior_error or mismatch.
#include "postgres.hpp"  // first: PostgreSQL headers need postgres.h before them

#include <cstring>

extern "C" {
#include "access/xact.h"
#include "funcapi.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
}

#include "../core/error.hpp"
#include "canonical.hpp"
#include "guard.hpp"
#include "record.hpp"
#include "settings.hpp"
#include "spi.hpp"
#include "stats.hpp"
#include "text.hpp"

using namespace idem;

namespace {

enum Kind { fresh, in_flight, prior_result, prior_error, mismatch, kind_count };
static_assert(pg::begin_mismatch - pg::begin_fresh == mismatch, "begin counters follow the kinds");
constexpr const char* kind_labels[kind_count] = {"fresh", "in_flight", "prior_result", "prior_error",
                                                 "mismatch"};

// The outcome's tuple descriptor and enum label OIDs, looked up once per
// call site and kept in fn_extra.
struct OutcomeType {
  TupleDesc desc;
  Datum kinds[kind_count];
};

OutcomeType& outcome_type(FunctionCallInfo fcinfo) {
  if (fcinfo->flinfo->fn_extra != nullptr) return *static_cast<OutcomeType*>(fcinfo->flinfo->fn_extra);
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    throw core::Error(core::sqlstate::internal_error, "idem_begin must return idem_outcome");
  MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
  auto* t = static_cast<OutcomeType*>(palloc(sizeof(OutcomeType)));
  t->desc = BlessTupleDesc(CreateTupleDescCopy(desc));
  const Oid kind_type = TupleDescAttr(t->desc, 0)->atttypid;
  for (int k = 0; k < kind_count; ++k)
    t->kinds[k] = DirectFunctionCall2(enum_in, CStringGetDatum(kind_labels[k]), ObjectIdGetDatum(kind_type));
  MemoryContextSwitchTo(old);
  fcinfo->flinfo->fn_extra = t;
  return *t;
}

// An answer: its kind and the columns of idem_outcome after kind, all NULL
// but submitted_hash unless the caller fills them.
struct Outcome {
  Kind kind;
  Datum values[6];
  bool nulls[6];
};

Outcome outcome(Kind kind, Datum submitted_hash) {
  Outcome o;
  o.kind = kind;
  for (bool& n : o.nulls) n = true;
  o.values[5] = submitted_hash, o.nulls[5] = false;
  return o;
}

Datum to_datum(FunctionCallInfo fcinfo, Outcome& o) {
  OutcomeType& t = outcome_type(fcinfo);
  o.values[0] = t.kinds[o.kind], o.nulls[0] = false;
  pg::count(static_cast<pg::Counter>(pg::begin_fresh + o.kind));
  return HeapTupleGetDatum(heap_form_tuple(t.desc, o.values, o.nulls));
}

bool same_bytes(Datum a, Datum b) {
  const bytea* x = DatumGetByteaPP(a);
  const bytea* y = DatumGetByteaPP(b);
  return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
         std::memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

// The replay window: the argument, or idempotency.replay_window; it must be
// positive in every field, so that expires_at lies after created_at.
Interval* replay_window(FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno)) {
    auto* w = static_cast<Interval*>(palloc0(sizeof(Interval)));
    w->time = static_cast<int64>(pg::replay_window_seconds) * USECS_PER_SEC;
    return w;
  }
  Interval* w = PG_GETARG_INTERVAL_P(argno);
  if (w->month < 0 || w->day < 0 || w->time < 0 || (w->month == 0 && w->day == 0 && w->time == 0))
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency replay window",
                      "The replay window must be positive, and no part of it (months, days, time) negative.");
  return w;
}

pg::Statement insert_in_progress = {
    "INSERT INTO idempotency.idempotency_record"
    " (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at)"
    " VALUES ($1, $2, 'in_progress', $3, $4, pg_catalog.now(), pg_catalog.now(),"
    " pg_catalog.now() OPERATOR(pg_catalog.+) $5)",
    5,
    {TEXTOID, TEXTOID, BYTEAOID, JSONBOID, INTERVALOID},
    nullptr};

// Waits until transaction xid ends or the deadline passes. The wait is an
// ordinary lock wait on the transaction (visible in pg_locks, broken by the
// deadlock detector, cancelled by statement_timeout or a cancel request),
// bounded by a lock_timeout set for the wait alone; running out of time is
// caught inside a subtransaction, and every other error goes on up.
void wait_for(TransactionId xid, TimestampTz deadline) {
  const long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
  if (remaining <= 0) return;
  const int nest_level = NewGUCNestLevel();
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%ld", remaining);
  if (LockTimeout == 0 || LockTimeout > remaining)
    (void)set_config_option("lock_timeout", timeout, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

  MemoryContext context = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  BeginInternalSubTransaction(nullptr);
  PG_TRY();
  {
    XactLockTableWait(xid, nullptr, nullptr, XLTW_None);
    ReleaseCurrentSubTransaction();
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    ErrorData* error = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = owner;
    if (error->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE) ReThrowError(error);
    FreeErrorData(error);
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  CurrentResourceOwner = owner;
  AtEOXact_GUC(true, nest_level);
}

}  // namespace

// Under the per-key lock, probe the key: nothing there inserts an
// in_progress row (fresh); a row another transaction has not committed is
// in flight (waited for up to idempotency.in_flight_wait); a committed row
// replays by status, or is a mismatch when its request hash differs. The
// row is never changed here except by that one insert.
IDEM_FUNCTION(idem_begin) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* key = pg::key_arg(fcinfo, 1);
  Jsonb* request = pg::payload_arg(fcinfo, 2, "request");
  Interval* window = replay_window(fcinfo, 3);
  const Datum submitted = PointerGetDatum(pg::request_hash_bytea(&request->root));
  // Read the clock only when a wait is configured: most begins never wait.
  const TimestampTz deadline =
      pg::in_flight_wait_ms > 0 ? TimestampTzPlusMilliseconds(GetCurrentTimestamp(), pg::in_flight_wait_ms) : 0;

  for (;;) {
    const LOCKTAG lock = pg::lock_key(ns, key);
    pg::Probe p = pg::probe_key(ns, key);
    if (p.found == pg::Found::nothing) {
      const Datum values[5] = {PointerGetDatum(ns), PointerGetDatum(key), submitted, PointerGetDatum(request),
                               IntervalPGetDatum(window)};
      pg::execute(insert_in_progress, values, "     ");
      pg::unlock_key(lock);
      Outcome o = outcome(fresh, submitted);
      return to_datum(fcinfo, o);
    }
    pg::unlock_key(lock);

    if (p.found == pg::Found::busy) {
      if (pg::in_flight_wait_ms > 0 && GetCurrentTimestamp() < deadline) {
        pg::count(pg::waits);
        wait_for(p.busy_xid, deadline);
        continue;  // the holder ended (or time is up): look again
      }
      Outcome o = outcome(in_flight, submitted);
      return to_datum(fcinfo, o);
    }

    if (!same_bytes(p.request_hash, submitted)) {
      Outcome o = outcome(mismatch, submitted);
      o.values[3] = p.request_payload, o.nulls[3] = false;
      o.values[4] = p.request_hash, o.nulls[4] = false;
      return to_datum(fcinfo, o);
    }
    switch (p.status) {
      case 'c': {
        Outcome o = outcome(prior_result, submitted);
        o.values[1] = p.result_payload, o.nulls[1] = p.result_null;
        return to_datum(fcinfo, o);
      }
      case 'f': {
        Outcome o = outcome(prior_error, submitted);
        o.values[2] = p.error_payload, o.nulls[2] = p.error_null;
        return to_datum(fcinfo, o);
      }
      default: {  // in_progress, committed by a transaction that has not finished the work
        Outcome o = outcome(in_flight, submitted);
        return to_datum(fcinfo, o);
      }
    }
  }
}
