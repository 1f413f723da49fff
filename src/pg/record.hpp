// record.hpp: the idempotency_record table seen from C: where it is, the
// short per-key lock that orders concurrent begins, and the probe that sees
// rows other transactions have not committed yet.
#pragma once

#include "postgres.hpp"

extern "C" {
#include "storage/lock.h"
}

namespace idem::pg {

// Registers the relcache hook that forgets the cached table and index OIDs
// (called once from _PG_init).
void register_record_invalidation();

// The namespace registry's tables and the store's owner. installed is false
// while the schema is still 0.3.0's (the library was updated, the extension
// not yet): then there is no registry, and the caller's own privileges apply.
struct Registry {
  bool installed;
  Oid owner;   // owner of idempotency_record: the store's statements run as this role
  Oid config;  // idem_namespace_config
  Oid grant;   // idem_namespace_grant
};
Registry registry();

// Takes and releases the per-key lock: a heavyweight lock in the advisory
// lock space, on a 64-bit hash of (database, namespace, key) and with a
// field4 that PostgreSQL's own pg_advisory_* functions never use (they use
// 1 and 2), so it cannot collide with an application's advisory locks. It is
// held only while one begin probes and inserts, never until commit, so a
// transaction may begin any number of keys without filling the lock table,
// and a hash collision costs a wait of microseconds, never a wrong answer.
// lock_key returns the tag it locked, for unlock_key.
LOCKTAG lock_key(const text* ns, const text* key);
void unlock_key(const LOCKTAG& tag);

// What the probe found for one (namespace, key).
enum class Found { nothing, busy, row };

struct Probe {
  Found found;
  TransactionId busy_xid;  // busy: the transaction inserting, updating or deleting the row
  // row: the latest committed version (or this transaction's own), copied
  char status;             // 'i' in_progress, 'c' committed, 'f' failed
  Datum request_hash;      // bytea
  Datum request_payload;   // jsonb
  Datum result_payload;    // jsonb or null
  Datum error_payload;     // jsonb or null
  bool result_null;
  bool error_null;
  bool request_null;       // store_request was off
  TimestampTz updated_at;  // when the holder began (or took over); see began_known
  bool began_known;        // false when busy because another transaction is updating or deleting the
                           // row: the version seen is the one before, so its time says nothing
  int32 attempt;           // row: 1, or more after takeovers
  bool own;                // row: this transaction wrote it (never taken over: the work is ours)
};

// Looks the key up through the primary key with a dirty snapshot, which sees
// rows of transactions still in progress without waiting for them: such a
// row is "busy" (in flight elsewhere). A committed row, or one this
// transaction wrote, is returned whatever the isolation level: a key that a
// concurrent transaction has committed must replay, not be inserted again.
Probe probe_key(const text* ns, const text* key);

}  // namespace idem::pg
