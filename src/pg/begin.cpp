// begin.cpp: idem_begin(namespace, key, request, replay_window), the entry
// of the store: fresh, in_flight, prior_result, prior_error or mismatch.
#include "postgres.hpp"  // first: PostgreSQL headers need postgres.h before them

#include <algorithm>
#include <climits>

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "funcapi.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/typcache.h"
}

#include "../core/error.hpp"
#include "canonical.hpp"
#include "citus.hpp"
#include "claims.hpp"
#include "extension.hpp"
#include "fence.hpp"
#include "guard.hpp"
#include "policy.hpp"
#include "lock_tags.hpp"
#include "probe.hpp"
#include "store.hpp"
#include "settings.hpp"
#include "spi.hpp"
#include "stats.hpp"
#include "text.hpp"
#include "write.hpp"

using namespace idem;

namespace {

enum Kind { fresh, in_flight, prior_result, prior_error, mismatch, kind_count };
static_assert(pg::begin_mismatch - pg::begin_fresh == mismatch, "begin counters follow the kinds");
constexpr const char* kind_labels[kind_count] = {"fresh", "in_flight", "prior_result", "prior_error",
                                                 "mismatch"};

// Columns of idem_outcome. A 0.3.0 schema's type ends at submitted_hash, a
// 0.4 schema's at age, a 0.5 to 0.7 schema's at fence; heap_form_tuple
// forms only the columns the type has.
enum Field { f_kind, f_result, f_error, f_recorded_request, f_recorded_hash, f_submitted_hash, f_attempt, f_age,
             f_fence, f_lease_ends_at, f_takeover, f_recovery_point, f_recovery_state, field_count };

// The outcome's tuple descriptor and enum label OIDs, kept for the backend
// rather than in fn_extra: a prepared statement gets a new FmgrInfo for every
// execution, so fn_extra would be rebuilt on every call (about 5,000
// instructions). They are of the last result type seen (idem_begin and
// idem_begin_batch share it), valid while the type cache describes it as it
// did (tupDesc_identifier changes when the type does, as an update
// script's ALTER TYPE changes it).
struct OutcomeType {
  Oid type;  // idem_outcome's OID (idem_begin's and idem_begin_batch's result)
  uint64 identifier;
  TupleDesc desc;  // in TopMemoryContext; nullptr until built
  Datum kinds[kind_count];
};

OutcomeType kept{};

OutcomeType& outcome_type(FunctionCallInfo fcinfo) {
  const Oid function = fcinfo->flinfo->fn_oid;
  TypeCacheEntry* type = lookup_type_cache(get_func_rettype(function), TYPECACHE_TUPDESC);
  if (type->tupDesc == nullptr)
    throw core::Error(core::sqlstate::internal_error, "idem_begin must return idem_outcome");
  if (kept.desc != nullptr && kept.type == type->type_id && kept.identifier == type->tupDesc_identifier)
    return kept;
  // A type with more columns than this library knows would be formed from
  // values past the end of Outcome's arrays (docs/internals.md, "Entry
  // points across releases").
  if (type->tupDesc->natts > field_count)
    throw core::Error(core::sqlstate::internal_error, "idem_outcome has more columns than this library knows",
                      "Install the library of the extension's version, then reconnect.");
  const uint64 identifier = type->tupDesc_identifier;
  Datum kinds[kind_count];
  const Oid kind_type = TupleDescAttr(type->tupDesc, 0)->atttypid;
  for (int k = 0; k < kind_count; ++k)
    kinds[k] = DirectFunctionCall2(enum_in, CStringGetDatum(kind_labels[k]), ObjectIdGetDatum(kind_type));
  MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
  TupleDesc desc = BlessTupleDesc(CreateTupleDescCopy(type->tupDesc));
  MemoryContextSwitchTo(old);
  if (kept.desc != nullptr) FreeTupleDesc(kept.desc);
  kept.type = type->type_id, kept.identifier = identifier, kept.desc = desc;
  std::copy(kinds, kinds + kind_count, kept.kinds);
  return kept;
}

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

// What a takeover found of the attempts before it: the last recovery point
// a holder recorded, and its state (NULL: none recorded, or a store
// without the recovery columns).
struct Recovered {
  Datum point;
  Datum state;
  bool point_null;
  bool state_null;
};

constexpr Recovered nothing_recovered{0, 0, true, true};

// fresh, with the attempt number, (0.5 schema) the fence that the
// transitions take to prove the record is still this attempt's, and (0.8
// schema) when its lease ends (NULL without a lease), whether it takes over
// an attempt that may have acted, and that attempt's last recovery point.
Outcome fresh_outcome(Datum submitted_hash, int32 attempt, Datum fence, bool fence_null, const pg::Policy& policy,
                      TimestampTz now, bool takeover, const Recovered& recovered) {
  Outcome o = outcome(fresh, submitted_hash);
  o.values[f_attempt] = Int32GetDatum(attempt), o.nulls[f_attempt] = false;
  o.values[f_fence] = fence, o.nulls[f_fence] = fence_null;
  if (policy.lease_us > 0)
    o.values[f_lease_ends_at] = TimestampTzGetDatum(now + policy.lease_us), o.nulls[f_lease_ends_at] = false;
  o.values[f_takeover] = BoolGetDatum(takeover), o.nulls[f_takeover] = false;
  o.values[f_recovery_point] = recovered.point, o.nulls[f_recovery_point] = recovered.point_null;
  o.values[f_recovery_state] = recovered.state, o.nulls[f_recovery_state] = recovered.state_null;
  return o;
}

// in_flight, with how long ago the holder claimed the key (or took the
// record over, or last extended its lease), when that is known, and, in a
// namespace with a lease, for a claim another transaction committed, when
// its lease ends and a begin may take it over: while the holder's
// transaction runs no begin takes it over, so then it is NULL.
Outcome in_flight_outcome(Datum submitted_hash, const pg::Probe& p, TimestampTz now, const pg::Policy& policy) {
  Outcome o = outcome(in_flight, submitted_hash);
  if (!p.began_known) return o;
  auto* age = static_cast<Interval*>(palloc0(sizeof(Interval)));
  age->time = std::max<int64>(0, now - p.updated_at);
  o.values[f_age] = IntervalPGetDatum(age), o.nulls[f_age] = false;
  if (policy.lease_us > 0 && p.found == pg::Found::row && !p.own)
    o.values[f_lease_ends_at] = TimestampTzGetDatum(pg::takeover_from(p, policy)), o.nulls[f_lease_ends_at] = false;
  return o;
}

// The answer as a tuple of idem_outcome as t describes it.
HeapTuple to_tuple(const OutcomeType& t, Outcome& o) {
  o.values[f_kind] = t.kinds[o.kind], o.nulls[f_kind] = false;
  return heap_form_tuple(t.desc, o.values, o.nulls);
}

// The answer of a single call, counted.
Datum to_datum(FunctionCallInfo fcinfo, Outcome& o) {
  pg::count(static_cast<pg::Counter>(pg::begin_fresh + o.kind));
  return HeapTupleGetDatum(to_tuple(outcome_type(fcinfo), o));
}

// Whether a window (no field negative) is at least interval '10000 years',
// measured as interval comparison does (30-day months, 24-hour days): far
// from the end of timestamptz (294276 AD), which expires_at must not pass.
bool too_long(const Interval& w) {
  const double days = w.month * static_cast<double>(DAYS_PER_MONTH) + w.day +
                      static_cast<double>(w.time) / static_cast<double>(USECS_PER_DAY);
  return days >= 10000.0 * MONTHS_PER_YEAR * DAYS_PER_MONTH;
}

const char* interval_text(Interval* w) { return DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(w))); }

// The replay window: the argument, the namespace's, or the defaults'. An
// argument must be positive in every field,
// so that expires_at lies after created_at, under 10,000 years (the registry
// checks its own), and no longer than the namespace's configured window,
// which is a limit the caller cannot lift.
Interval* replay_window(FunctionCallInfo fcinfo, int argno, const pg::Policy& policy, const text* ns) {
  auto* configured = static_cast<Interval*>(palloc(sizeof(Interval)));
  *configured = policy.replay_window;
  if (PG_ARGISNULL(argno)) {
    if (policy.has_replay_window && too_long(*configured))  // configured by 0.4.0, which had no upper bound
      throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency replay window",
                        "The namespace's replay_window is 10000 years or more; configure one under 10000 years.");
    return configured;
  }
  Interval* w = PG_GETARG_INTERVAL_P(argno);
  if (w->month < 0 || w->day < 0 || w->time < 0 || (w->month == 0 && w->day == 0 && w->time == 0) ||
      too_long(*w)) {
    const char* given = interval_text(w);
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency replay window",
                      std::string("The replay window must be positive and under 10000 years, and no part of it "
                                  "(months, days, time) negative, not ") +
                          given + ".");
  }
  if (policy.has_replay_window &&
      DatumGetBool(DirectFunctionCall2(interval_gt, IntervalPGetDatum(w), IntervalPGetDatum(configured)))) {
    const char* given = interval_text(w);
    const char* limit = interval_text(configured);
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency replay window exceeds the namespace's",
                      std::string("Namespace \"") + pg::string_of(ns) + "\" keeps records for at most " + limit +
                          " (its replay_window); the call asked for " + given + ".",
                      "Pass a shorter replay_window or none; the namespace's administrator sets the limit with "
                      "idem_namespace_configure.");
  }
  return w;
}

// How long this call waits for a concurrent holder, in milliseconds: the
// argument (0.6.0's idem_begin has one), else the defaults'.
// An argument must be zero or more in every field and at most what the
// setting allows (INT_MAX milliseconds, 24.8 days); days count 24 hours and
// months 30 days, as a lease does.
int64 in_flight_wait_ms(FunctionCallInfo fcinfo, int argno, const pg::Policy& policy) {
  if (PG_NARGS() <= argno || PG_ARGISNULL(argno)) return policy.in_flight_wait_ms;
  Interval* w = PG_GETARG_INTERVAL_P(argno);
  const double ms = (w->month * static_cast<double>(DAYS_PER_MONTH) + w->day) * (USECS_PER_DAY / 1000.0) +
                    static_cast<double>(w->time) / 1000.0;
  if (w->month < 0 || w->day < 0 || w->time < 0 || ms > INT_MAX) {
    const char* given = interval_text(w);
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency in-flight wait",
                      std::string("in_flight_wait must be zero or positive, at most 2147483647 ms (about 24.8 "
                                  "days), and no part of it (months, days, time) negative, not ") +
                          given + ".");
  }
  return static_cast<int64>(ms);
}

// The fresh in_progress record, claimed at $6 (the clock when the key was
// claimed, not the transaction's start: a transaction that waited before
// claiming must not start its lease half spent). The first form serves 0.3
// and 0.4 schemas; the second records the fence drawn for the claim ($7)
// and names every column, as the direct write does, so that a column
// default an operator adds never makes the two paths write different rows.
#define INSERT_IN_PROGRESS(MORE_COLUMNS, MORE_VALUES)                                                          \
  "INSERT INTO @store@"                                                                                         \
  " (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at" MORE_COLUMNS \
  ") VALUES ($1, $2, 'in_progress', $3, $4, $6, $6, $6 OPERATOR(pg_catalog.+) $5" MORE_VALUES ")"

const pg::StoreStatement insert_in_progress = {INSERT_IN_PROGRESS("", ""),
                                               6,
                                               {TEXTOID, TEXTOID, BYTEAOID, JSONBOID, INTERVALOID, TIMESTAMPTZOID}};

const pg::StoreStatement insert_fenced = {
    INSERT_IN_PROGRESS(", result_payload, error_payload, attempt, fence", ", NULL, NULL, 1, $7"),
    7,
    {TEXTOID, TEXTOID, BYTEAOID, JSONBOID, INTERVALOID, TIMESTAMPTZOID, INT8OID}};

// The same for a store with the recovery columns: a first claim has no
// recovery point, whatever default an operator gave them (a takeover would
// answer it as one an earlier attempt recorded).
const pg::StoreStatement insert_recovering = {
    INSERT_IN_PROGRESS(", result_payload, error_payload, attempt, fence, recovery_point, recovery_state",
                       ", NULL, NULL, 1, $7, NULL, NULL"),
    7,
    {TEXTOID, TEXTOID, BYTEAOID, JSONBOID, INTERVALOID, TIMESTAMPTZOID, INT8OID}};

// Takes over the in_progress record the probe saw (the version claimed at
// $5): the next attempt, claimed at $4 (with the new claim's fence, $6).
// The row is locked with SKIP LOCKED, so a takeover never waits for another
// transaction (a late worker finishing the record) while it holds the
// per-key lock; it then matches nothing, as it does when the record changed
// since the probe.
#define TAKE_OVER(FENCE_SET, RETURNING)                                                                        \
  "UPDATE @store@"                                                                                              \
  " SET attempt = attempt OPERATOR(pg_catalog.+) 1, updated_at = $4,"                                          \
  " expires_at = $4 OPERATOR(pg_catalog.+) $3" FENCE_SET                                                        \
  " WHERE ctid OPERATOR(pg_catalog.=) (SELECT ctid FROM @store@"                                                \
  "   WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2"                        \
  "   AND status OPERATOR(pg_catalog.=) 'in_progress' AND updated_at OPERATOR(pg_catalog.=) $5"                 \
  "   FOR UPDATE SKIP LOCKED)"                                                                                  \
  " RETURNING " RETURNING

const pg::StoreStatement take_over = {TAKE_OVER("", "attempt"), 5,
                                      {TEXTOID, TEXTOID, INTERVALOID, TIMESTAMPTZOID, TIMESTAMPTZOID}};

const pg::StoreStatement take_over_fenced = {
    TAKE_OVER(", fence = $6", "attempt"), 6, {TEXTOID, TEXTOID, INTERVALOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}};

// The same, answering the recovery point the record had (a store with the
// recovery columns): the takeover keeps it, and the new attempt resumes
// after it.
const pg::StoreStatement take_over_recovering = {
    TAKE_OVER(", fence = $6", "attempt, recovery_point, recovery_state"),
    6,
    {TEXTOID, TEXTOID, INTERVALOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}};

// How many keys one transaction may claim by their lock alone before its
// claims are written as rows again: a quarter of the lock table's share per
// transaction, since those locks never take the fast path and the table
// (max_locks_per_transaction x (max_connections + max_prepared_transactions)
// entries) is shared by every session.
long held_limit() { return max_locks_per_xact / 4; }

// Waits on a hot standby, where the primary's transactions hold no lock here:
// polls until xid has ended, the deadline passes, or an interrupt (a cancel,
// statement_timeout) is raised.
void wait_on_standby(TransactionId xid, TimestampTz deadline) {
  while (TransactionIdIsInProgress(xid)) {
    const long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
    if (remaining <= 0) return;
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, std::min(remaining, 10L),
                    PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
  }
}

// Waits until transaction xid ends (an invalid xid: until the key's lock,
// held by a claim without a row, is free) or the deadline passes. The wait
// is an ordinary lock wait (visible in pg_locks, broken by the
// deadlock detector, cancelled by statement_timeout or a cancel request),
// bounded by a lock_timeout set for the wait alone (to the time left,
// whatever the session's lock_timeout); running out of time is caught
// inside a subtransaction, and every other error goes on up.
void wait_for(TransactionId xid, const LOCKTAG& key_lock, TimestampTz deadline) {
  if (RecoveryInProgress()) return wait_on_standby(xid, deadline);
  const long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
  if (remaining <= 0) return;
  const int nest_level = NewGUCNestLevel();
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%ld", remaining);
  (void)set_config_option("lock_timeout", timeout, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

  MemoryContext context = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  BeginInternalSubTransaction(nullptr);
  PG_TRY();
  {
    if (TransactionIdIsValid(xid)) {
      XactLockTableWait(xid, nullptr, nullptr, XLTW_None);
    } else {  // a claim held by the key's lock alone
      (void)LockAcquire(&key_lock, ExclusiveLock, false, false);
      LockRelease(&key_lock, ExclusiveLock, false);
    }
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

// What a begin asks of its namespace's policy: the replay window (checked
// with the request's size before anything is read) and the key as stored.
struct Asked {
  Interval* window;
  text* key;
};

Asked asked(FunctionCallInfo fcinfo, const pg::Policy& policy, const text* ns, const text* given_key,
            const Jsonb* request) {
  Interval* window = replay_window(fcinfo, 3, policy, ns);
  pg::check_payload_size(request, "request", ns, policy);
  return {window, pg::stored_key(given_key, policy)};
}

// A mismatch with the claim or record of the key: its request hash and its
// request (request_null: none kept). With store_request off the recorded
// request is never shown, even one kept from before it was switched off.
Outcome mismatch_outcome(Datum submitted, Datum recorded_hash, Datum recorded_request, bool request_null,
                         const pg::Policy& policy) {
  Outcome o = outcome(mismatch, submitted);
  o.values[f_recorded_request] = recorded_request;
  o.nulls[f_recorded_request] = request_null || !policy.store_request;
  o.values[f_recorded_hash] = recorded_hash, o.nulls[f_recorded_hash] = false;
  return o;
}

// The answer of a record whose work is done (committed or failed, or an
// in_progress record with another request): its replay, or a mismatch.
Outcome finished_outcome(const pg::Probe& p, Datum submitted, const pg::Policy& policy) {
  if (!pg::same_bytes(DatumGetByteaPP(p.request_hash), DatumGetByteaPP(submitted)))
    return mismatch_outcome(submitted, p.request_hash, p.request_payload, p.request_null, policy);
  Outcome o = outcome(p.status == 'c' ? prior_result : prior_error, submitted);
  if (p.status == 'c')
    o.values[f_result] = p.result_payload, o.nulls[f_result] = p.result_null;
  else
    o.values[f_error] = p.error_payload, o.nulls[f_error] = p.error_null;
  return o;
}

// What a batch passes for each of its keys: its in-flight wait and the
// deadline of the whole call (0: no wait), and its names for messages.
struct Wait {
  int64 ms;
  TimestampTz deadline;
};
struct Names {
  const char* function;     // the SQL function, for a read-only transaction's hint
  const char* entry_point;  // the Citus entry point's suffix (<table>_begin)
};
constexpr Names single_names{"idem_begin", "begin"};
constexpr Names batch_names{"idem_begin_batch", "begin_batch"};

// A fingerprint a batch's first pass made (0: none, made under the
// namespace's lock), and whether the namespace's pointers left parts of the
// request out of it: the second pass makes it again when pointers were in
// force at either pass.
struct Hashed {
  Datum hash;
  bool pointed;
};

// The lock a begin takes on its store's table: RowExclusiveLock, as INSERT
// ... ON CONFLICT takes it, when the begin may write (taking it only after
// the probe, a lock upgrade, could deadlock with REINDEX or CREATE INDEX);
// AccessShareLock in a read-only transaction (a standby), which never writes.
LOCKMODE store_lock_mode() { return XactReadOnly ? AccessShareLock : RowExclusiveLock; }

// The body of every entry point (see below). A committed or failed record
// that no running transaction is changing is final: its replay (or
// mismatch) is answered from a first look, without the namespace's or the
// key's lock (docs/internals.md, "A replay without locks"). Anything else
// is decided under the namespace lock and then the per-key lock, probing
// again: nothing there inserts an in_progress row (fresh); a row another
// transaction has not committed is in flight (waited for up to
// idempotency.in_flight_wait); a committed row replays by status, or is a
// mismatch when its request hash differs; an abandoned in_progress row is
// taken over (fresh, with the next attempt number and a new fence).
// Nothing about the namespace's records is read before the caller is
// authorized for it. given_key is the caller's key (trimmed and checked);
// fcinfo's arguments 3 and 4 are the replay window and the in-flight wait,
// read where a single call reads them (a batch passes its wait and the
// deadline of the whole call). A batch makes the first looks of all its
// keys itself (first_pass), then calls this for each key left, with what
// its first look made (looked): all but the first look.
Outcome begin_key(FunctionCallInfo fcinfo, text* ns, text* given_key, Jsonb* request, const Wait* batch_wait,
                  const Names& names, const Hashed* looked = nullptr) {
  const LOCKMODE table_lock = store_lock_mode();
  Datum submitted;
  int64 wait_ms;
  // The store as the first look opened it: while its locks are held, its
  // indexes cannot be replaced nor its triggers changed, so the first look
  // under the namespace lock uses it again when the policy names the same
  // table and key.
  pg::Store opened;
  Oid opened_for;
  bool opened_hashed;
  pg::Policy hashed_under;  // the policy the fingerprint was made under
  {
    const pg::Policy policy = pg::authorize(ns);
    hashed_under = policy;
    pg::refuse_where_citus_would_split_the_store(fcinfo, pg::citus_distributes(policy.store));
    const Asked a = asked(fcinfo, policy, ns, given_key, request);
    // The checks in the order of 0.5.0's (the caller's grant, the
    // arguments), so that every error is the one it was.
    submitted = looked != nullptr ? looked->hash
                                  : PointerGetDatum(pg::request_hash_bytea(&request->root, policy.ignore));
    wait_ms = batch_wait != nullptr ? batch_wait->ms : in_flight_wait_ms(fcinfo, 4, policy);
    opened_for = InvalidOid, opened_hashed = false;
    if (looked == nullptr) {
      opened = pg::open_store(ns, policy.store, table_lock, pg::Call{a.key, policy.hash_keys, names.entry_point});
      opened_for = policy.store, opened_hashed = policy.hash_keys;
    }
    const pg::Probe p = looked == nullptr ? pg::probe_key(opened, ns, a.key, given_key) : pg::Probe{};
    if (looked == nullptr && p.found == pg::Found::row && p.status != 'i' && pg::answerable_unlocked(p)) {
      // The policy as it is now: one that changed while the table lock was
      // awaited (hash_keys switched, and a record of the new form committed)
      // could have looked up another key's record. A record found under the
      // policy still in force is this key's.
      const pg::Policy now = pg::authorize(ns);
      if (pg::same_lookup(now, policy)) {
        return finished_outcome(p, submitted, now);
      }
    }
  }
  // A caller not granted the namespace was refused above, before it could
  // take the namespace's lock, whose tag would show a pg_locks reader which
  // tag is that namespace's. The policy is read again under the lock that
  // changing it takes, so no begin can insert a raw key once hash_keys has
  // been switched on. The lock is awaited holding no lock of the first
  // look's on the table: the change that holds it may be moving the
  // namespace's records and then dropping or altering that table, which
  // waits for those locks (a deadlock).
  bool reuse = looked == nullptr;
  if (!pg::try_lock_namespace(ns, ShareLock)) {
    if (reuse) pg::release_store(opened, table_lock);
    reuse = false;
    pg::lock_namespace(ns, ShareLock);
  }
  const pg::Policy policy = pg::authorize(ns);
  const Asked a = asked(fcinfo, policy, ns, given_key, request);
  // Pointers changed before the lock was granted (the change waits for no
  // record): the fingerprint is made again under the pointers now in force.
  // (A batch's second pass has no first policy at hand: it makes it again
  // whenever pointers were in force at either pass, or none was made.)
  if (looked != nullptr ? looked->hash == 0 || looked->pointed || policy.ignore != nullptr
                        : !pg::same_fingerprint(policy, hashed_under))
    submitted = PointerGetDatum(pg::request_hash_bytea(&request->root, policy.ignore));
  Interval* window = a.window;
  text* key = a.key;
  // Read the clock only when a wait is configured: most begins never wait.
  const TimestampTz deadline = batch_wait != nullptr ? batch_wait->deadline
                               : wait_ms > 0 ? TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms)
                                             : 0;

  // The version of an abandoned record whose takeover found it locked by
  // another transaction (see below); 0: none.
  TimestampTz locked_version = 0;
  bool waited = false;  // counted once, however many times it looks again
  reuse = reuse && opened_for == policy.store && opened_hashed == policy.hash_keys;
  // Without a lease a claim never outlives its transaction, so the key's
  // lock held to the end can say what an in_progress row says (docs/
  // internals.md, "The store", step 4). The key's lock is never waited for,
  // in any namespace: its holder may hold it to the end (a lease added to a
  // namespace leaves the claims made before it held).
  const bool holding = policy.lease_us == 0;
  for (;;) {
    LOCKTAG lock;
    const bool locked = pg::try_lock_key(ns, key, &lock);
    const pg::Store store =
        reuse ? opened : pg::open_store(ns, policy.store, table_lock, pg::Call{key, policy.hash_keys, names.entry_point});
    reuse = false;
    const bool fenced = store.fenced;
    // This transaction's own claim, held by the lock alone: in flight since
    // it was claimed, as its own in_progress row would be, or a mismatch
    // with its request.
    if (const pg::HeldClaim* own = locked ? pg::held_claim(ns, key) : nullptr) {
      pg::unlock_key(lock);
      if (pg::same_bytes(own->request_hash, DatumGetByteaPP(submitted))) {
        pg::Probe claimed{};
        claimed.began_known = true, claimed.updated_at = own->claimed_at, claimed.own = true;
        return in_flight_outcome(submitted, claimed, GetCurrentTimestamp(), policy);
      }
      return mismatch_outcome(submitted, PointerGetDatum(own->request_hash), PointerGetDatum(own->request),
                              own->request == nullptr, policy);
    }
    pg::Probe p = pg::probe_key(store, ns, key, given_key);
    const TimestampTz now = GetCurrentTimestamp();
    if (!locked && (p.found == pg::Found::nothing ||
                    (p.found == pg::Found::row && p.status == 'i' &&
                     pg::same_bytes(DatumGetByteaPP(p.request_hash), DatumGetByteaPP(submitted))))) {
      // Held by another transaction: its claim without a row, or a begin
      // between its probe and its insert or takeover. In flight, since when
      // is not known; a wait waits for that lock. (A row with another
      // request is a mismatch whoever holds the lock.)
      p.found = pg::Found::busy;
      p.busy_xid = InvalidTransactionId;
      p.began_known = false;
    }
    if (p.found == pg::Found::nothing) {
      pg::require_read_write(given_key, names.function, "begin");
      Datum fence = 0;
      if (holding && store.own && store.direct && !pg::citus_distributes(policy.store) &&
          pg::held_locks() < held_limit()) {
        fence = Int64GetDatum(pg::draw_fence());
        const pg::HeldClaim held{DatumGetInt64(fence), now,
                                 DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
                                                                         TimestampTzGetDatum(now),
                                                                         IntervalPGetDatum(window))),
                                 DatumGetByteaPP(submitted), policy.store_request ? request : nullptr};
        pg::claim_held(ns, key, policy.hash_keys, held);
        return fresh_outcome(submitted, 1, fence, false, policy, now, false, nothing_recovered);
      }
      if (store.direct) {
        fence = Int64GetDatum(pg::insert_claim(store, ns, key, submitted, policy.store_request ? request : nullptr,
                                               now, window));
      } else {
        if (fenced) fence = Int64GetDatum(pg::draw_fence());
        const Datum values[7] = {PointerGetDatum(ns),      PointerGetDatum(key),       submitted,
                                 PointerGetDatum(request), IntervalPGetDatum(window), TimestampTzGetDatum(now),
                                 fence};
        pg::execute(fenced && store.recovers ? insert_recovering : fenced ? insert_fenced : insert_in_progress, store,
                    values,
                    policy.store_request ? "       " : "   n   ");
      }
      const bool fence_null = !store.direct && !fenced;
      if (locked) pg::unlock_key(lock);
      if (policy.lease_us == 0) pg::claim(ns, key, policy.hash_keys);
      return fresh_outcome(submitted, 1, fence, fence_null, policy, now, false, nothing_recovered);
    }
    const bool same_request = p.found == pg::Found::row && pg::same_bytes(DatumGetByteaPP(p.request_hash), DatumGetByteaPP(submitted));
    if (locked && same_request && p.status == 'i' && !p.own && pg::registry().installed && now >= pg::takeover_from(p, policy) &&
        p.updated_at != locked_version) {
      pg::require_read_write(given_key, names.function, "begin");
      const Datum fence = fenced ? Int64GetDatum(pg::draw_fence()) : 0;
      const Datum values[6] = {PointerGetDatum(ns),      PointerGetDatum(key),
                               IntervalPGetDatum(window), TimestampTzGetDatum(now),
                               TimestampTzGetDatum(p.updated_at), fence};
      Datum taken[3];  // attempt, recovery_point, recovery_state
      bool none[3] = {true, true, true};
      const pg::StoreStatement& statement =
          fenced && store.recovers ? take_over_recovering : fenced ? take_over_fenced : take_over;
      pg::execute(statement, store, values, "      ", taken, none);
      if (locked) pg::unlock_key(lock);
      if (none[0]) {
        // Changed meanwhile, or locked by another transaction (a late
        // worker finishing it): look again, and if the same version is
        // still there it is held, so it is in flight. Under REPEATABLE READ
        // or SERIALIZABLE a record changed after the snapshot cannot be
        // updated, and looking again would see the same forever.
        if (IsolationUsesXactSnapshot())
          throw core::Error(core::sqlstate::serialization_failure,
                            "could not serialize access due to a concurrent change of an idempotency record",
                            "The in-progress record whose lease ran out changed after this transaction's "
                            "snapshot was taken; retry the transaction.");
        locked_version = p.updated_at;
        continue;
      }
      if (policy.lease_us == 0) pg::claim(ns, key, policy.hash_keys);
      pg::count(pg::takeovers);
      const Recovered recovered{taken[1], taken[2], none[1], none[2]};
      return fresh_outcome(submitted, DatumGetInt32(taken[0]), fence, !fenced, policy, now, true, recovered);
    }
    if (locked) pg::unlock_key(lock);

    if (p.found == pg::Found::busy) {
      if (wait_ms > 0 && now < deadline) {
        if (!waited) pg::count(pg::waits);
        waited = true;
        wait_for(p.busy_xid, lock, deadline);
        continue;  // the holder ended (or time is up): look again
      }
      return in_flight_outcome(submitted, p, now, policy);
    }

    if (same_request && p.status == 'i') {  // committed by a transaction that has not finished the work
      return in_flight_outcome(submitted, p, now, policy);
    }
    return finished_outcome(p, submitted, policy);
  }
}

// The entry points' body: one key, its arguments in fcinfo.
Datum begin(FunctionCallInfo fcinfo) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  Jsonb* request = pg::payload_arg(fcinfo, 2, "request");
  Outcome o = begin_key(fcinfo, ns, given_key, request, nullptr, single_names);
  return to_datum(fcinfo, o);
}

// The most keys one batch takes: its answers are kept until the last key
// is begun (a tuple each), and its claims held to the transaction's end.
constexpr int max_batch = 10000;

// Raises e again with element i of what (keys, requests) named in its detail.
[[noreturn]] void element_error(const core::Error& e, int i, const char* what) {
  throw core::Error(e.sqlstate(), e.message(), "Element " + std::to_string(i + 1) + " of " + what + ": " + e.detail(),
                    e.hint());
}

// Element i of array values (nulls), for a batch: a key checked as
// idem_parse does, or a request; an error names the element.
text* batch_key(Datum* values, bool* nulls, int i) {
  if (nulls[i])
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency key must not be null",
                      "Element " + std::to_string(i + 1) + " of keys is NULL; pass the keys that idem_parse or "
                      "idem_mint produced.");
  try {
    return pg::key_of(DatumGetTextPP(values[i]));
  } catch (const core::Error& e) {
    element_error(e, i, "keys");
  }
}

// The elements of one-dimensional array argument argno (NULL: an error
// naming what); an array of more dimensions is refused.
int batch_elements(FunctionCallInfo fcinfo, int argno, const char* what, Oid type, Datum** values, bool** nulls) {
  if (PG_ARGISNULL(argno))
    throw core::Error(core::sqlstate::invalid_parameter_value, std::string("idempotency ") + what + " must not be null",
                      "Pass an array, one element per key.");
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(argno);
  if (ARR_NDIM(array) > 1)
    throw core::Error(core::sqlstate::invalid_parameter_value, std::string("idempotency ") + what +
                          " must be a one-dimensional array",
                      "It has " + std::to_string(ARR_NDIM(array)) + " dimensions.");
  if (ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array)) > max_batch)
    throw core::Error(core::sqlstate::program_limit_exceeded, "too many idempotency keys in one batch",
                      "The batch has " + std::to_string(ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array))) + " " +
                          what + "; at most " + std::to_string(max_batch) + " keys are begun in one call.",
                      "Split it into several calls.");
  int16 length;
  bool byval;
  char align;
  get_typlenbyvalalign(type, &length, &byval, &align);
  int n = 0;
  deconstruct_array(array, type, length, byval, align, values, nulls, &n);
  return n;
}

// What a batch checks before it begins keys, under policy: a store
// distributed by key is refused (a batch's keys live on several nodes), and
// the window and every request's size must pass (the element named); with
// answered, only the requests of the keys not answered yet.
void check_batch(FunctionCallInfo fcinfo, const text* ns, const pg::Policy& policy, int n, Datum* requests,
                 HeapTuple* answered) {
  if (pg::citus_distributes(policy.store) && pg::citus_table(policy.store).column == pg::col_key_value)
    throw core::Error(core::sqlstate::feature_not_supported,
                      "idem_begin_batch cannot begin keys of a store distributed by key",
                      "The store of idempotency namespace \"" + pg::string_of(ns) +
                          "\" is distributed by key_value: a batch's keys live on several nodes.",
                      "Call idem_begin (its entry point) for each key, or distribute the store by namespace "
                      "(docs/scale-out.md).");
  (void)replay_window(fcinfo, 3, policy, ns);
  for (int i = 0; i < n; ++i) {
    if (answered != nullptr && answered[i] != nullptr) continue;  // replayed already
    try {
      pg::check_payload_size(DatumGetJsonbP(requests[i]), "request", ns, policy);
    } catch (const core::Error& e) {
      element_error(e, i, "requests");
    }
  }
}

// A batch's keys and what is known of them: the i-th key (checked) with
// the i-th request; order, the order in which they are begun; answers[i]
// once the key is answered (with its kind), else hashes[i] once the first
// pass left it to the second.
struct Batch {
  int n;
  text** keys;
  Datum* requests;
  int* order;
  HeapTuple* answers;
  Kind* kinds;
  Hashed* hashes;
  OutcomeType type;         // its desc a copy in the query's memory, the result's
  MemoryContext context;    // the answers'
  MemoryContext per_key;    // reset after each key
};

// Whether two policies answer a first look alike: they look it up alike,
// and both show the recorded request or neither (a batch's answers are
// formed under the first; a single begin answers under the second).
bool same_looks(const pg::Policy& a, const pg::Policy& b) {
  return pg::same_lookup(a, b) && a.store_request == b.store_request;
}

// One look at each key (first_pass), in order, through prober under policy.
// A committed or failed record answers its key (its replay, or a mismatch);
// every other key, and a later copy of one, is left with its fingerprint.
// Returns how many keys are left.
int look_at_keys(pg::Prober* prober, const pg::Policy& policy, Batch& b) {
  int pending = 0;
  for (int k = 0; k < b.n; ++k) {
    CHECK_FOR_INTERRUPTS();
    const int i = b.order[k];
    // A later copy of a key left undecided is left too: it is begun after
    // the earlier one, as a second call would be.
    const bool copy = k > 0 && b.hashes[b.order[k - 1]].hash != 0 && pg::same_bytes(b.keys[b.order[k - 1]], b.keys[i]);
    MemoryContextSwitchTo(b.per_key);
    const Datum submitted =
        PointerGetDatum(pg::request_hash_bytea(&DatumGetJsonbP(b.requests[i])->root, policy.ignore));
    // The row's values are read where they are, and copied once, into the answer.
    const pg::Probe p = pg::probe_in_place(prober, pg::stored_key(b.keys[i], policy), b.keys[i]);
    MemoryContextSwitchTo(b.context);
    if (!copy && p.found == pg::Found::row && p.status != 'i' && pg::answerable_unlocked(p)) {
      Outcome o = finished_outcome(p, submitted, policy);
      b.answers[i] = to_tuple(b.type, o);
      b.kinds[i] = o.kind;
    } else {
      b.hashes[i] = Hashed{datumCopy(submitted, false, -1), policy.ignore != nullptr};
      ++pending;
    }
    MemoryContextReset(b.per_key);
  }
  return pending;
}

// Forgets every answer and fingerprint of a look: each key is begun under
// the namespace's lock, its fingerprint made there.
void forget_looks(Batch& b) {
  for (int i = 0; i < b.n; ++i) b.answers[i] = nullptr, b.hashes[i] = Hashed{0, false};
}

// The batch's first pass: its keys looked at without the namespace's lock,
// through one store opened once (returned in *opened, whose locks the batch
// gives back before it waits for the namespace's lock) and one prober,
// under policy, read before the store was opened. The policy read again
// after the last key stands for the read a single begin makes after its
// probe: if it differs in what decides an answer (same_looks), no answer
// stands and every key is left to the second pass, which looks again under
// the namespace's lock. Returns how many keys are left.
int first_pass(FunctionCallInfo fcinfo, text* ns, const pg::Policy& policy, Batch& b, pg::Store* opened) {
  if (b.n == 0) return 0;
  pg::refuse_where_citus_would_split_the_store(fcinfo, pg::citus_distributes(policy.store));
  // A store a batch may use routes every key alike (check_batch): the
  // first key stands for all of them.
  MemoryContextSwitchTo(b.per_key);
  const pg::Call call{pg::stored_key(b.keys[b.order[0]], policy), policy.hash_keys, batch_names.entry_point};
  *opened = pg::open_store(ns, policy.store, store_lock_mode(), call);
  MemoryContextSwitchTo(b.context);
  MemoryContextReset(b.per_key);
  pg::Prober* prober = pg::open_prober(*opened, ns);
  int pending = look_at_keys(prober, policy, b);
  pg::close_prober(prober);
  if (!same_looks(pg::authorize(ns), policy)) {
    forget_looks(b);
    pending = b.n;
  }
  return pending;
}

// idem_begin_batch: each key begun as idem_begin would begin it, in the
// order of the keys' bytes (so that two batches lock their common keys in
// one order and cannot deadlock), the i-th request with the i-th key; the
// answers are returned in the input's order. A key given twice is begun
// twice, the second after the first, as two calls would. The in-flight wait
// bounds the whole call.
Datum begin_batch(FunctionCallInfo fcinfo) {
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) || (rsinfo->allowedModes & SFRM_Materialize) == 0)
    throw core::Error(core::sqlstate::feature_not_supported, "idem_begin_batch cannot return its rows here",
                      "Call it in a FROM clause: SELECT * FROM idem_begin_batch(...).");
  text* ns = pg::namespace_arg(fcinfo, 0);
  Datum* key_values;
  bool* key_nulls;
  bool* request_nulls;
  Batch b{};
  b.n = batch_elements(fcinfo, 1, "keys", TEXTOID, &key_values, &key_nulls);
  const int requests = batch_elements(fcinfo, 2, "requests", JSONBOID, &b.requests, &request_nulls);
  const int n = b.n;
  if (n != requests)
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency keys and requests differ in length",
                      "There are " + std::to_string(n) + " keys and " + std::to_string(requests) +
                          " requests; pass one request per key, in the same order.");
  b.keys = static_cast<text**>(palloc(sizeof(text*) * (n > 0 ? n : 1)));
  for (int i = 0; i < n; ++i) b.keys[i] = batch_key(key_values, key_nulls, i);
  for (int i = 0; i < n; ++i)
    if (request_nulls[i])
      throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency request must not be null",
                        "Element " + std::to_string(i + 1) + " of requests is NULL; use 'null'::jsonb for a JSON "
                        "null.");
  // Checked before any key is begun, against the policy read first, and
  // again under the namespace's lock before the keys that need it.
  const pg::Policy policy = pg::authorize(ns);
  check_batch(fcinfo, ns, policy, n, b.requests, nullptr);
  const int64 wait_ms = in_flight_wait_ms(fcinfo, 4, policy);
  const Wait wait{wait_ms, wait_ms > 0 ? TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms) : 0};

  // The order in which the keys are begun: by their bytes, then by position.
  b.order = static_cast<int*>(palloc(sizeof(int) * (n > 0 ? n : 1)));
  for (int i = 0; i < n; ++i) b.order[i] = i;
  text** keys = b.keys;
  std::stable_sort(b.order, b.order + n, [keys](int x, int y) {
    const int lx = VARSIZE_ANY_EXHDR(keys[x]), ly = VARSIZE_ANY_EXHDR(keys[y]);
    const int c = memcmp(VARDATA_ANY(keys[x]), VARDATA_ANY(keys[y]), std::min(lx, ly));
    return c != 0 ? c < 0 : lx < ly;
  });

  // Two passes, as idem_begin does for one key. The first looks at each key
  // without the namespace's lock and answers the final records (a replay,
  // or a mismatch), as a redelivered batch's keys mostly are. When keys are
  // left, the second takes the namespace's lock and begins them under it,
  // in the same order.
  b.context = CurrentMemoryContext;
  b.per_key = AllocSetContextCreate(b.context, "idem_begin_batch key", ALLOCSET_DEFAULT_SIZES);
  b.answers = static_cast<HeapTuple*>(palloc0(sizeof(HeapTuple) * (n > 0 ? n : 1)));
  b.kinds = static_cast<Kind*>(palloc(sizeof(Kind) * (n > 0 ? n : 1)));
  b.hashes = static_cast<Hashed*>(palloc0(sizeof(Hashed) * (n > 0 ? n : 1)));
  b.type = outcome_type(fcinfo);
  MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
  b.type.desc = CreateTupleDescCopy(b.type.desc);
  MemoryContextSwitchTo(old);
  pg::Store opened{};
  if (first_pass(fcinfo, ns, policy, b, &opened) > 0) {
    // As idem_begin does: the namespace's lock at once if it is free,
    // keeping the first pass's locks on the store; if not, those go back
    // first (a lock the transaction held before the call stays held), and
    // the wait holds none of them.
    if (!pg::try_lock_namespace(ns, ShareLock)) {
      if (OidIsValid(opened.table)) pg::release_store(opened, store_lock_mode());
      pg::lock_namespace(ns, ShareLock);
    }
    check_batch(fcinfo, ns, pg::authorize(ns), n, b.requests, b.answers);
    for (int k = 0; k < n; ++k) {
      CHECK_FOR_INTERRUPTS();
      const int i = b.order[k];
      if (b.answers[i] != nullptr) continue;
      MemoryContextSwitchTo(b.per_key);
      Outcome o = begin_key(fcinfo, ns, b.keys[i], DatumGetJsonbP(b.requests[i]), &wait, batch_names, &b.hashes[i]);
      MemoryContextSwitchTo(b.context);
      b.answers[i] = to_tuple(b.type, o);
      b.kinds[i] = o.kind;
      MemoryContextReset(b.per_key);
    }
  }
  // Counted once the call has all its answers: a call that fails counts none.
  for (int i = 0; i < n; ++i) pg::count(static_cast<pg::Counter>(pg::begin_fresh + b.kinds[i]));

  old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
  Tuplestorestate* store = tuplestore_begin_heap(true, false, work_mem);
  MemoryContextSwitchTo(old);
  for (int i = 0; i < n; ++i) tuplestore_puttuple(store, b.answers[i]);
  rsinfo->returnMode = SFRM_Materialize;
  rsinfo->setResult = store;
  rsinfo->setDesc = b.type.desc;
  return static_cast<Datum>(0);
}

}  // namespace

// idem_begin_batch and idem_begin as 1.0.0 declares them: the defaults come
// from idem_defaults and the lock secret from idempotency_internal, which no
// older library reads, so that a session still running one is refused
// after the update rather than begin under the old defaults and lock tags.
IDEM_FUNCTION(idem_begin_batch_1_0) { return begin_batch(fcinfo); }
IDEM_FUNCTION(idem_begin_1_0) { return begin(fcinfo); }

// idem_begin_batch as 0.9.0 declares it: requests fingerprinted without
// what the namespace's pointers name. A library older than 0.9.0 has no
// such symbol, so a backend that loaded one before the update fails
// cleanly instead of fingerprinting whole requests.
IDEM_FUNCTION(idem_begin_batch_0_9) { return begin_batch(fcinfo); }

// idem_begin_batch as 0.8.0 declares it, for a schema not yet updated.
IDEM_FUNCTION(idem_begin_batch) { return begin_batch(fcinfo); }

// idem_begin as 0.9.0 declares it: as idem_begin_batch_0_9, a new symbol so
// that an older library is refused after the update.
IDEM_FUNCTION(idem_begin_0_9) { return begin(fcinfo); }

// idem_begin as 0.8.0 declares it: its outcome tells a takeover from a first
// claim, with the last recovery point, and when a lease ends. A library
// older than 0.8.0 has no such symbol, so a backend that loaded one before
// the update fails cleanly instead of answering a takeover as a bare fresh.
IDEM_FUNCTION(idem_begin_0_8) { return begin(fcinfo); }

// idem_begin as 0.6.0 declares it (an in_flight_wait argument). A library
// older than 0.6.0 has no such symbol, so a backend that loaded one before
// the update fails cleanly instead of ignoring the argument.
IDEM_FUNCTION(idem_begin_0_6) { return begin(fcinfo); }

// idem_begin as 0.5.0 declares it (its outcome has a fence), for a schema
// not yet updated.
IDEM_FUNCTION(idem_begin_0_5) { return begin(fcinfo); }

// idem_begin as 0.2.0 to 0.4.1 declare it, for a schema not yet updated.
IDEM_FUNCTION(idem_begin) { return begin(fcinfo); }
