// backend.hpp: the two ways a store's records are written, chosen once when
// the store is opened (store.hpp): directly through heapam and the index
// access methods, for a table exactly as the install scripts make the
// extension's (write.cpp, purge.cpp); or through SQL statements kept per
// table and run as the table's owner, which honour whatever an operator or
// a service added to it (sql_backend.cpp). Both are the same operations, so
// the store's functions never ask which one they have.
#pragma once

#include "claims.hpp"
#include "postgres.hpp"

namespace idem::pg {

struct Store;
struct Leases;

// Which in_progress record a transition may change: only one this
// transaction claimed (none), or the one drawn with this fence.
struct Claim {
  enum Kind { none, fence } kind;
  int64 value;
};

// What forgetting a record did: forgot it; kept it, because its work may
// have had effects (taken over: attempt > 1; or it has a recovery point,
// point non-NULL, palloc'd); or found no record the proof names.
struct Forgot {
  enum Result { forgotten, kept, nothing } result;
  int32 attempt;
  const char* point;
};

// What taking an abandoned record over found: nothing matched (changed or
// locked since the look), or the new attempt and the last recovery point.
struct TakenOver {
  bool taken;
  int32 attempt;
  Datum point, state;
  bool point_null, state_null;
};

struct Backend {
  // Inserts the fresh in_progress record claimed at now, expiring at now +
  // window (request NULL: the namespace keeps none); returns its fence.
  int64 (*claim)(const Store& store, text* ns, text* key, Datum request_hash, Jsonb* request, TimestampTz now,
                 Interval* window);
  // Inserts the finished record of a claim held by its lock alone
  // (committing: with the result, else the error); keep_request: the
  // namespace keeps requests now.
  void (*insert_finished)(const Store& store, text* ns, text* key, const HeldClaim& held, bool committing,
                          Jsonb* payload, bool keep_request);
  // Moves the in_progress record the proof names to committed or failed;
  // false when none matches.
  bool (*finish)(const Store& store, text* ns, text* key, const Claim& proof, bool committing, Jsonb* payload);
  // Deletes the in_progress record the proof names, unless its work may
  // have had effects.
  Forgot (*forget)(const Store& store, text* ns, text* key, const Claim& proof);
  // Deletes up to batch expired records (purge.hpp's rules); how many.
  int64 (*purge)(const Store& store, int32 batch, const Leases& leases);
};

extern const Backend direct_backend;
extern const Backend sql_backend;

// Takes over the abandoned in_progress record of (ns, key) whose version
// the look saw (updated_at version): the next attempt, claimed at now with
// a new fence. Never waits for another transaction (SKIP LOCKED). Both
// backends use it: it is rare.
TakenOver take_over(const Store& store, text* ns, text* key, Interval* window, TimestampTz now,
                    TimestampTz version, int64 fence);

// Moves the lease of the in_progress record drawn with fence on (a
// heartbeat), recording point and state (a recovery point) when point is
// given; returns the record's new updated_at, or 0 when none matched.
TimestampTz extend_claim(const Store& store, text* ns, text* key, int64 fence, text* point, Jsonb* state);

}  // namespace idem::pg
