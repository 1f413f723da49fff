// begin.cpp: idem_begin(namespace, key, request, replay_window), the entry
// of the store: fresh, in_flight, prior_result, prior_error or mismatch.
#include "postgres.hpp"  // first: PostgreSQL headers need postgres.h before them

#include <algorithm>
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
#include "policy.hpp"
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

// Columns of idem_outcome. A 0.3.0 schema's type ends at submitted_hash;
// heap_form_tuple reads only the columns the type has.
enum Field { f_kind, f_result, f_error, f_recorded_request, f_recorded_hash, f_submitted_hash, f_attempt, f_age,
             field_count };

// An answer: its kind and the columns of idem_outcome after kind, all NULL
// but submitted_hash unless the caller fills them.
struct Outcome {
  Kind kind;
  Datum values[field_count];
  bool nulls[field_count];
};

Outcome outcome(Kind kind, Datum submitted_hash) {
  Outcome o;
  o.kind = kind;
  for (bool& n : o.nulls) n = true;
  o.values[f_submitted_hash] = submitted_hash, o.nulls[f_submitted_hash] = false;
  return o;
}

Outcome fresh_outcome(Datum submitted_hash, int32 attempt) {
  Outcome o = outcome(fresh, submitted_hash);
  o.values[f_attempt] = Int32GetDatum(attempt), o.nulls[f_attempt] = false;
  return o;
}

// in_flight, with how long ago the holder began (or took the record over),
// when that is known.
Outcome in_flight_outcome(Datum submitted_hash, const pg::Probe& p) {
  Outcome o = outcome(in_flight, submitted_hash);
  if (!p.began_known) return o;
  const TimestampTz began = p.updated_at;
  auto* age = static_cast<Interval*>(palloc0(sizeof(Interval)));
  age->time = std::max<int64>(0, GetCurrentTimestamp() - began);
  o.values[f_age] = IntervalPGetDatum(age), o.nulls[f_age] = false;
  return o;
}

Datum to_datum(FunctionCallInfo fcinfo, Outcome& o) {
  OutcomeType& t = outcome_type(fcinfo);
  o.values[f_kind] = t.kinds[o.kind], o.nulls[f_kind] = false;
  pg::count(static_cast<pg::Counter>(pg::begin_fresh + o.kind));
  return HeapTupleGetDatum(heap_form_tuple(t.desc, o.values, o.nulls));
}

bool same_bytes(Datum a, Datum b) {
  const bytea* x = DatumGetByteaPP(a);
  const bytea* y = DatumGetByteaPP(b);
  return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
         std::memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

// Whether a window (no field negative) is at least interval '10000 years',
// measured as interval comparison does (30-day months, 24-hour days): far
// from the end of timestamptz (294276 AD), which expires_at must not pass.
bool too_long(const Interval& w) {
  const double days = w.month * static_cast<double>(DAYS_PER_MONTH) + w.day +
                      static_cast<double>(w.time) / static_cast<double>(USECS_PER_DAY);
  return days >= 10000.0 * MONTHS_PER_YEAR * DAYS_PER_MONTH;
}

// The replay window: the argument, the namespace's, or
// idempotency.replay_window; an argument must be positive in every field, so
// that expires_at lies after created_at, and under 10,000 years (the
// registry checks its own).
Interval* replay_window(FunctionCallInfo fcinfo, int argno, const pg::Policy& policy) {
  if (PG_ARGISNULL(argno) && policy.has_replay_window) {
    if (too_long(policy.replay_window))  // configured by 0.4.0, which had no upper bound
      throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency replay window",
                        "The namespace's replay_window is 10000 years or more; configure one under 10000 years.");
    auto* w = static_cast<Interval*>(palloc(sizeof(Interval)));
    *w = policy.replay_window;
    return w;
  }
  if (PG_ARGISNULL(argno)) {
    auto* w = static_cast<Interval*>(palloc0(sizeof(Interval)));
    w->time = static_cast<int64>(pg::replay_window_seconds) * USECS_PER_SEC;
    return w;
  }
  Interval* w = PG_GETARG_INTERVAL_P(argno);
  if (w->month < 0 || w->day < 0 || w->time < 0 || (w->month == 0 && w->day == 0 && w->time == 0) ||
      too_long(*w)) {
    const char* given = DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(w)));
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency replay window",
                      std::string("The replay window must be positive and under 10000 years, and no part of it "
                                  "(months, days, time) negative, not ") +
                          given + ".");
  }
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

// Takes over an in_progress record whose lease has run out: the next
// attempt, begun now (this statement's time, not the transaction's, so that
// an old transaction does not start the new lease half spent). Matches
// nothing if the record was finished meanwhile.
pg::Statement take_over = {
    "UPDATE idempotency.idempotency_record"
    " SET attempt = attempt OPERATOR(pg_catalog.+) 1, updated_at = pg_catalog.statement_timestamp(),"
    " expires_at = pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) $3"
    " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2"
    " AND status OPERATOR(pg_catalog.=) 'in_progress'"
    " RETURNING attempt",
    3,
    {TEXTOID, TEXTOID, INTERVALOID},
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
// replays by status, or is a mismatch when its request hash differs; an
// in_progress row past the namespace's lease is taken over (fresh, with the
// next attempt number). Nothing about the namespace's records is read
// before the caller is authorized for it.
IDEM_FUNCTION(idem_begin) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  Jsonb* request = pg::payload_arg(fcinfo, 2, "request");
  const pg::Policy policy = pg::authorize(ns);
  Interval* window = replay_window(fcinfo, 3, policy);
  pg::check_payload_size(request, "request", ns, policy);
  text* key = pg::stored_key(given_key, policy);
  const Datum submitted = PointerGetDatum(pg::request_hash_bytea(&request->root));
  // Read the clock only when a wait is configured: most begins never wait.
  const TimestampTz deadline =
      pg::in_flight_wait_ms > 0 ? TimestampTzPlusMilliseconds(GetCurrentTimestamp(), pg::in_flight_wait_ms) : 0;

  for (;;) {
    const LOCKTAG lock = pg::lock_key(ns, key);
    pg::Probe p = pg::probe_key(ns, key);
    if (p.found == pg::Found::nothing) {
      pg::require_read_write(given_key, "idem_begin", "begin");
      const Datum values[5] = {PointerGetDatum(ns), PointerGetDatum(key), submitted, PointerGetDatum(request),
                               IntervalPGetDatum(window)};
      pg::execute(insert_in_progress, values, policy.store_request ? "     " : "   n ");
      pg::unlock_key(lock);
      Outcome o = fresh_outcome(submitted, 1);
      return to_datum(fcinfo, o);
    }
    const bool same_request = p.found == pg::Found::row && same_bytes(p.request_hash, submitted);
    if (same_request && p.status == 'i' && !p.own && policy.lease_us > 0 &&
        GetCurrentTimestamp() - p.updated_at >= policy.lease_us) {
      pg::require_read_write(given_key, "idem_begin", "begin");
      const Datum values[3] = {PointerGetDatum(ns), PointerGetDatum(key), IntervalPGetDatum(window)};
      Datum attempt;
      bool none = true;
      pg::execute(take_over, values, "   ", &attempt, &none);
      pg::unlock_key(lock);
      if (none) {
        // Finished meanwhile: look again. Under REPEATABLE READ or
        // SERIALIZABLE a record committed after the snapshot cannot be
        // updated, and looking again would see the same forever.
        if (IsolationUsesXactSnapshot())
          throw core::Error(core::sqlstate::serialization_failure,
                            "could not serialize access due to a concurrent change of an idempotency record",
                            "The in-progress record whose lease ran out changed after this transaction's "
                            "snapshot was taken; retry the transaction.");
        continue;
      }
      Outcome o = fresh_outcome(submitted, DatumGetInt32(attempt));
      return to_datum(fcinfo, o);
    }
    pg::unlock_key(lock);

    if (p.found == pg::Found::busy) {
      if (pg::in_flight_wait_ms > 0 && GetCurrentTimestamp() < deadline) {
        pg::count(pg::waits);
        wait_for(p.busy_xid, deadline);
        continue;  // the holder ended (or time is up): look again
      }
      Outcome o = in_flight_outcome(submitted, p);
      return to_datum(fcinfo, o);
    }

    if (!same_request) {
      Outcome o = outcome(mismatch, submitted);
      o.values[f_recorded_request] = p.request_payload, o.nulls[f_recorded_request] = p.request_null;
      o.values[f_recorded_hash] = p.request_hash, o.nulls[f_recorded_hash] = false;
      return to_datum(fcinfo, o);
    }
    switch (p.status) {
      case 'c': {
        Outcome o = outcome(prior_result, submitted);
        o.values[f_result] = p.result_payload, o.nulls[f_result] = p.result_null;
        return to_datum(fcinfo, o);
      }
      case 'f': {
        Outcome o = outcome(prior_error, submitted);
        o.values[f_error] = p.error_payload, o.nulls[f_error] = p.error_null;
        return to_datum(fcinfo, o);
      }
      default: {  // in_progress, committed by a transaction that has not finished the work
        Outcome o = in_flight_outcome(submitted, p);
        return to_datum(fcinfo, o);
      }
    }
  }
}
