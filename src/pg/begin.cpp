// begin.cpp: idem_begin(namespace, key, request, replay_window,
// in_flight_wait), the entry of the store: fresh, in_flight, prior_result,
// prior_error or mismatch. It looks and acts; core::decide chooses.
#include "begin.hpp"

#include <algorithm>
#include <climits>
#include <string>

extern "C" {
#include "access/xact.h"
#include "utils/timestamp.h"
}

#include "../core/decide.hpp"
#include "../core/error.hpp"
#include "backend.hpp"
#include "canonical.hpp"
#include "citus.hpp"
#include "claims.hpp"
#include "fence.hpp"
#include "guard.hpp"
#include "lock_tags.hpp"
#include "probe.hpp"
#include "spi.hpp"
#include "stats.hpp"
#include "store.hpp"
#include "text.hpp"
#include "wait.hpp"

namespace idem::pg {

namespace {

// Whether a window (no field negative) is at least interval '10000 years',
// measured as interval comparison does (30-day months, 24-hour days): far
// from the end of timestamptz (294276 AD), which expires_at must not pass.
bool too_long(const Interval& w) {
  const double days = w.month * static_cast<double>(DAYS_PER_MONTH) + w.day +
                      static_cast<double>(w.time) / static_cast<double>(USECS_PER_DAY);
  return days >= 10000.0 * MONTHS_PER_YEAR * DAYS_PER_MONTH;
}

const char* interval_text(Interval* w) {
  return DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(w)));
}

// The namespace's own window when the call gives none (one configured by
// 0.4.0, which had no upper bound, is refused here).
Interval* configured_window(const Policy& policy) {
  auto* configured = static_cast<Interval*>(palloc(sizeof(Interval)));
  *configured = policy.replay_window;
  if (policy.has_replay_window && too_long(*configured))
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency replay window",
                      "The namespace's replay_window is 10000 years or more; configure one under 10000 years.");
  return configured;
}

// How many keys one transaction may claim by their lock alone before its
// claims are written as rows again: a quarter of the lock table's share per
// transaction, since those locks never take the fast path and the table is
// shared by every session.
long held_limit() { return max_locks_per_xact / 4; }

// What a begin asks of its namespace's policy: the replay window (checked
// with the request's size before anything is read) and the key as stored.
struct Asked {
  Interval* window;
  text* key;
};

Asked asked(FunctionCallInfo fcinfo, const Policy& policy, const text* ns, const text* given_key,
            const Jsonb* request) {
  Interval* window = replay_window(fcinfo, 3, policy, ns);
  check_payload_size(request, "request", ns, policy);
  return {window, stored_key(given_key, policy)};
}

// What a begin knows once it holds the namespace's lock.
struct Begin {
  text* ns;
  text* given_key;
  Jsonb* request;
  const Names* names;
  Policy policy;
  Interval* window;
  text* key;        // as stored
  Datum submitted;  // the request's fingerprint
  int64 wait_ms;
  TimestampTz deadline;
  Store opened;  // the first look's store, while reuse
  bool reuse;
};

// The first look, without the namespace's or the key's lock. A final
// record answers there (answered; docs/internals.md, "A replay without
// locks"); otherwise it leaves its store opened, its locks held, with the
// fingerprint and the policy it was made under. A batch made its first
// looks itself (looked): then only the checks are made, in the order of
// 0.5.0's (the caller's grant, the arguments), so that every error is the
// one it was.
struct First {
  bool answered;
  Outcome answer;
  bool has_opened;
  Store opened;
  Policy policy;
  Datum submitted;
  int64 wait_ms;
};

First first_look(FunctionCallInfo fcinfo, text* ns, text* given_key, Jsonb* request, const Wait* batch_wait,
                 const Names& names, const Hashed* looked) {
  First f{};
  f.policy = authorize(ns);
  refuse_where_citus_would_split_the_store(fcinfo, citus_distributes(f.policy.store));
  const Asked a = asked(fcinfo, f.policy, ns, given_key, request);
  f.submitted = looked != nullptr ? looked->hash : PointerGetDatum(request_hash_bytea(&request->root, f.policy.ignore));
  f.wait_ms = batch_wait != nullptr ? batch_wait->ms : in_flight_wait_ms(fcinfo, 4, f.policy);
  if (looked != nullptr) return f;
  f.opened = open_store(ns, f.policy.store, store_lock_mode(), Call{a.key, f.policy.hash_keys, names.entry_point});
  f.has_opened = true;
  const Probe p = probe_key(f.opened, ns, a.key, given_key);
  if (!final_unlocked(p)) return f;
  // The policy as it is now: one that changed while the table lock was
  // awaited (hash_keys switched, and a record of the new form committed)
  // could have looked up another key's record.
  const Policy now = authorize(ns);
  if (same_lookup(now, f.policy)) f.answered = true, f.answer = finished_outcome(p, f.submitted, now);
  return f;
}

// The namespace's lock, taken at once if it is free, keeping the first
// look's locks on the store; if not, those go back first (the change that
// holds it may be moving the namespace's records and then dropping or
// altering that table, which waits for them: a deadlock). Whether the
// first look's store may still be used.
bool lock_namespace_after(const text* ns, const First& f) {
  if (try_lock_namespace(ns, ShareLock)) return f.has_opened;
  if (f.has_opened) release_store(f.opened, store_lock_mode());
  lock_namespace(ns, ShareLock);
  return false;
}

// The begin as it stands under the namespace's lock, the policy read again
// under the lock that changing it takes. Pointers changed before the lock
// was granted: the fingerprint is made again under those now in force (a
// batch's second pass has no first policy at hand: it makes it again
// whenever pointers were in force at either pass, or none was made).
Begin under_namespace_lock(FunctionCallInfo fcinfo, text* ns, text* given_key, Jsonb* request, const Wait* batch_wait,
                           const Names& names, const Hashed* looked, const First& f, bool reuse) {
  Begin b{ns, given_key, request, &names, authorize(ns), nullptr, nullptr, f.submitted, f.wait_ms, 0, f.opened, false};
  const Asked a = asked(fcinfo, b.policy, ns, given_key, request);
  b.window = a.window, b.key = a.key;
  if (looked != nullptr ? looked->hash == 0 || looked->pointed || b.policy.ignore != nullptr
                        : !same_fingerprint(b.policy, f.policy))
    b.submitted = PointerGetDatum(request_hash_bytea(&request->root, b.policy.ignore));
  // The clock is read only when a wait is configured: most begins never wait.
  b.deadline = batch_wait != nullptr ? batch_wait->deadline
               : b.wait_ms > 0       ? TimestampTzPlusMilliseconds(GetCurrentTimestamp(), b.wait_ms)
                                     : 0;
  b.reuse = reuse && f.policy.store == b.policy.store && f.policy.hash_keys == b.policy.hash_keys;
  return b;
}

// What the look under the locks saw, for core::decide. tried: the version
// of an abandoned record whose takeover found it locked (0: none).
core::Look look_of(const Begin& b, const Probe& p, bool locked, TimestampTz tried, TimestampTz now) {
  const bool row = p.found == Found::row;
  core::Look l{};
  l.found = p.found, l.status = p.status, l.key_locked = locked;
  l.same_request = row && same_bytes(DatumGetByteaPP(p.request_hash), DatumGetByteaPP(b.submitted));
  l.own = row && p.own;
  l.lease_over = row && p.status == 'i' && now >= takeover_from(p, b.policy);
  l.tried = row && p.updated_at == tried;
  l.may_wait = b.wait_ms > 0 && now < b.deadline;
  return l;
}

// This transaction's own claim, held by the key's lock alone: in flight
// since it was claimed, as its own in_progress row would be, or a mismatch.
Outcome held_here(const Begin& b, const HeldClaim& own) {
  core::Look l{};
  l.held_here = l.key_locked = true;
  l.same_request = same_bytes(own.request_hash, DatumGetByteaPP(b.submitted));
  if (core::decide(l) == core::Step::mismatch)
    return mismatch_outcome(b.submitted, PointerGetDatum(own.request_hash), PointerGetDatum(own.request),
                            own.request == nullptr, b.policy);
  Probe claimed{};
  claimed.began_known = true, claimed.updated_at = own.claimed_at, claimed.own = true;
  return in_flight_outcome(b.submitted, claimed, GetCurrentTimestamp(), b.policy);
}

// Claims the key at now, holding its lock (lock): by that lock alone to
// the transaction's end where core::hold_by_lock says so (docs/
// internals.md, "The store", step 4), else as an in_progress row.
Outcome claim_key(const Begin& b, const Store& store, const LOCKTAG& lock, TimestampTz now) {
  require_read_write(b.given_key, b.names->function, "begin");
  Jsonb* kept = b.policy.store_request ? b.request : nullptr;
  core::Place place{b.policy.lease_us > 0, store.own && store.backend == &direct_backend,
                    citus_distributes(b.policy.store), held_locks(), held_limit()};
#ifdef IDEM_MEASURE_ROW_CLAIMS  // bench: every claim written as a row
  place.held_limit = 0;
#endif
  if (core::hold_by_lock(place)) {
    const int64 fence = draw_fence();
    const TimestampTz expires = DatumGetTimestampTz(
        DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(now), IntervalPGetDatum(b.window)));
    claim_held(b.ns, b.key, b.policy.hash_keys, HeldClaim{fence, now, expires, DatumGetByteaPP(b.submitted), kept});
    return fresh_outcome(b.submitted, 1, fence, b.policy, now, false, nothing_recovered);
  }
  const int64 fence = store.backend->claim(store, b.ns, b.key, b.submitted, kept, now, b.window);
  unlock_key(lock);
  if (b.policy.lease_us == 0) claim(b.ns, b.key, b.policy.hash_keys);
  return fresh_outcome(b.submitted, 1, fence, b.policy, now, false, nothing_recovered);
}

// Takes over the abandoned record p, holding the key's lock: the next
// attempt, with the last recovery point. False when it changed meanwhile or
// another transaction holds it (a late worker finishing it): the caller
// looks again, and if the same version is still there it is in flight.
// Under REPEATABLE READ or SERIALIZABLE a record changed after the
// snapshot cannot be updated, and looking again would see the same forever.
bool take_over_key(const Begin& b, const Store& store, const Probe& p, const LOCKTAG& lock, TimestampTz now,
                   Outcome* answer) {
  require_read_write(b.given_key, b.names->function, "begin");
  const int64 fence = draw_fence();
  const TakenOver t = take_over(store, b.ns, b.key, b.window, now, p.updated_at, fence);
  unlock_key(lock);
  if (!t.taken) {
    if (IsolationUsesXactSnapshot())
      throw core::Error(core::sqlstate::serialization_failure,
                        "could not serialize access due to a concurrent change of an idempotency record",
                        "The in-progress record whose lease ran out changed after this transaction's "
                        "snapshot was taken; retry the transaction.");
    return false;
  }
  if (b.policy.lease_us == 0) claim(b.ns, b.key, b.policy.hash_keys);
  count(takeovers);
  count_in(b.ns, ns_takeovers);
  *answer = fresh_outcome(b.submitted, t.attempt, fence, b.policy, now, true,
                          Recovered{t.point, t.state, t.point_null, t.state_null});
  return true;
}

// Decides the key under the namespace's lock, then the key's: looks, asks
// core::decide, acts; after a wait or a takeover that found the record
// locked, looks again.
Outcome decide_key(Begin& b) {
  TimestampTz tried = 0;
  bool waited = false;  // counted once, however many times it looks again
  for (;;) {
    LOCKTAG lock;
    const bool locked = try_lock_key(b.ns, b.key, &lock);
    const Store store = b.reuse ? b.opened
                                : open_store(b.ns, b.policy.store, store_lock_mode(),
                                             Call{b.key, b.policy.hash_keys, b.names->entry_point});
    b.reuse = false;
    if (const HeldClaim* own = locked ? held_claim(b.ns, b.key) : nullptr) {
      unlock_key(lock);
      return held_here(b, *own);
    }
    Probe p = probe_key(store, b.ns, b.key, b.given_key);
    const TimestampTz now = GetCurrentTimestamp();
    const core::Look look = look_of(b, p, locked, tried, now);
    if (core::held_elsewhere(look)) p.found = Found::busy, p.busy_xid = InvalidTransactionId, p.began_known = false;
    const core::Step step = core::decide(look);
    if (step == core::Step::claim) return claim_key(b, store, lock, now);
    if (step == core::Step::take_over) {
      Outcome o;
      if (take_over_key(b, store, p, lock, now, &o)) return o;
      tried = p.updated_at;
      continue;
    }
    if (locked) unlock_key(lock);
    if (step == core::Step::wait) {
      if (!waited) count(waits), count_in(b.ns, ns_waits);
      waited = true;
      const TimestampTz started = GetCurrentTimestamp();
      wait_for(p.busy_xid, lock, b.deadline);
      count_in(b.ns, ns_wait_us, static_cast<uint64>(std::max<int64>(0, GetCurrentTimestamp() - started)));
      continue;  // the holder ended (or time is up): look again
    }
    if (step == core::Step::in_flight) return in_flight_outcome(b.submitted, p, now, b.policy);
    return finished_outcome(p, b.submitted, b.policy);
  }
}

// idem_begin's body: one key, its arguments in fcinfo.
Datum begin(FunctionCallInfo fcinfo) {
  text* ns = namespace_arg(fcinfo, 0);
  text* given_key = key_arg(fcinfo, 1);
  Jsonb* request = payload_arg(fcinfo, 2, "request");
  Outcome o = begin_key(fcinfo, ns, given_key, request, nullptr, single_names);
  return to_datum(fcinfo, ns, o);
}

}  // namespace

LOCKMODE store_lock_mode() { return XactReadOnly ? AccessShareLock : RowExclusiveLock; }

Interval* replay_window(FunctionCallInfo fcinfo, int argno, const Policy& policy, const text* ns) {
  if (PG_ARGISNULL(argno)) return configured_window(policy);
  Interval* w = PG_GETARG_INTERVAL_P(argno);
  if (w->month < 0 || w->day < 0 || w->time < 0 || (w->month == 0 && w->day == 0 && w->time == 0) || too_long(*w))
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency replay window",
                      std::string("The replay window must be positive and under 10000 years, and no part of it "
                                  "(months, days, time) negative, not ") +
                          interval_text(w) + ".");
  if (policy.has_replay_window &&
      DatumGetBool(DirectFunctionCall2(interval_gt, IntervalPGetDatum(w), IntervalPGetDatum(&policy.replay_window))))
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency replay window exceeds the namespace's",
                      std::string("Namespace \"") + string_of(ns) + "\" keeps records for at most " +
                          interval_text(const_cast<Interval*>(&policy.replay_window)) +
                          " (its replay_window); the call asked for " + interval_text(w) + ".",
                      "Pass a shorter replay_window or none; the namespace's administrator sets the limit with "
                      "idem_namespace_configure.");
  return w;
}

// Days count 24 hours and months 30 days, as a lease does.
int64 in_flight_wait_ms(FunctionCallInfo fcinfo, int argno, const Policy& policy) {
  if (PG_NARGS() <= argno || PG_ARGISNULL(argno)) return policy.in_flight_wait_ms;
  Interval* w = PG_GETARG_INTERVAL_P(argno);
  const double ms = (w->month * static_cast<double>(DAYS_PER_MONTH) + w->day) * (USECS_PER_DAY / 1000.0) +
                    static_cast<double>(w->time) / 1000.0;
  if (w->month < 0 || w->day < 0 || w->time < 0 || ms > INT_MAX)
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency in-flight wait",
                      std::string("in_flight_wait must be zero or positive, at most 2147483647 ms (about 24.8 "
                                  "days), and no part of it (months, days, time) negative, not ") +
                          interval_text(w) + ".");
  return static_cast<int64>(ms);
}

Outcome begin_key(FunctionCallInfo fcinfo, text* ns, text* given_key, Jsonb* request, const Wait* batch_wait,
                  const Names& names, const Hashed* looked) {
  const First f = first_look(fcinfo, ns, given_key, request, batch_wait, names, looked);
  if (f.answered) return f.answer;
  // A caller not granted the namespace was refused above, before it could
  // take the namespace's lock, whose tag would show a pg_locks reader which
  // tag is that namespace's.
  const bool reuse = lock_namespace_after(ns, f);
  Begin b = under_namespace_lock(fcinfo, ns, given_key, request, batch_wait, names, looked, f, reuse);
  return decide_key(b);
}

}  // namespace idem::pg

// idem_begin as 1.0.0 declares it: the defaults come from idem_defaults and
// the lock secret from idempotency_internal, which no older library reads,
// so that a session still running one is refused after the update rather
// than begin under the old defaults and lock tags.
IDEM_FUNCTION(idem_begin_1_0) { return idem::pg::begin(fcinfo); }

// idem_begin as 0.9 declares it, for a schema not yet updated.
IDEM_FUNCTION(idem_begin_0_9) { return idem::pg::begin(fcinfo); }
