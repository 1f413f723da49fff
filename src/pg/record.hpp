// record.hpp: the idempotency_record table seen from C: where it is, the
// short per-key lock that orders concurrent begins, the namespace lock that
// orders begins against administration, and the probe that sees rows other
// transactions have not committed yet.
#pragma once

#include "postgres.hpp"

extern "C" {
#include "access/genam.h"
#include "access/skey.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"
#include "storage/lock.h"
}

namespace idem::pg {

// Registers the relcache hook that forgets the cached OIDs and lock secret
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

// Whether the installed schema is 0.5.0's or later: records carry a fence
// (drawn at random since 0.6.0; from idem_fence_seq in 0.5.0's library),
// and lock tags are keyed with the store's secret.
bool fenced_schema();

// Column numbers of idempotency_record, as the install scripts create it.
enum Column : AttrNumber {
  col_namespace = 1,
  col_key_value,
  col_status,
  col_request_hash,
  col_request_payload,
  col_result_payload,
  col_error_payload,
  col_created_at,
  col_updated_at,
  col_expires_at,
  col_attempt,  // 0.4.0
  col_fence,    // 0.5.0
};

// Where the store's rows are, for writing them through heapam (write.cpp).
// direct is false when the table is not exactly what the install scripts
// made (an operator's index, trigger, rule, constraint or column) or the
// schema is older than 0.5.0: the writes then go through SQL, which honours
// what was added.
struct Layout {
  Oid table;
  Oid pkey;
  Oid expires_index;  // the index on expires_at
  bool direct;
};
// Scan keys for (ns, key) on the primary key index, in the index's own
// collations (ScanKeyInit's default, C, would miss rows of an index built
// with another).
void key_scan_keys(Relation index, const text* ns, const text* key, ScanKeyData (&keys)[2]);

// An index scan of the primary key for those keys under snapshot.
IndexScanDesc scan_key(Relation table, Relation index, Snapshot snapshot, ScanKeyData (&keys)[2]);

// The layout as it stands under RowExclusiveLock on the table, which this
// takes first, as INSERT and UPDATE do: while it is held no index, trigger
// or constraint can be added that the writes of this transaction would
// miss (CREATE INDEX CONCURRENTLY waits for the transaction to end and then
// indexes its rows).
Layout writable_layout();

// The per-key lock: a heavyweight lock in the advisory lock space whose tag
// is (database, 64 bits of HMAC-SHA256(secret, namespace and key)) with a
// field4 that PostgreSQL's own pg_advisory_* functions never use (they use 1
// and 2), so it cannot collide with an application's advisory locks, and a
// role that reads pg_locks can neither test a guessed key against it nor
// craft a key whose lock collides with another's. It is held only while one
// begin probes and inserts, never until commit, so a transaction may begin
// any number of keys without filling the lock table. lock_key returns the
// tag it locked, for unlock_key. (A 0.4 schema has no secret: its tags are
// unkeyed hashes, as that release made them.)
LOCKTAG lock_key(const text* ns, const text* key);
void unlock_key(const LOCKTAG& tag);

// The namespace lock, held until the transaction ends: every begin holds it
// in ShareLock, and the registry functions that must see every record of
// the namespace (changing hash_keys, dropping it) take ExclusiveLock, so they
// wait for the namespace's writers, and for no other namespace's.
void lock_namespace(const text* ns, LOCKMODE mode);

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
  TimestampTz updated_at;  // when the holder claimed the key (or took it over); see began_known
  TimestampTz expires_at;
  bool began_known;        // false when busy because another transaction is updating or deleting the
                           // row: the version seen is the one before, so its time says nothing
  int32 attempt;           // row: 1, or more after takeovers
  bool own;                // row: this transaction wrote it (never taken over: the work is ours)
};

// Looks the key up through the primary key with a dirty snapshot, which sees
// rows of transactions still in progress without waiting for them: such a
// row is "busy" (in flight elsewhere). Otherwise the row is committed (or
// this transaction's own). Under REPEATABLE READ and SERIALIZABLE a
// committed row that the transaction's snapshot does not see raises 40001,
// as INSERT ... ON CONFLICT does, and SERIALIZABLE registers the read with
// predicate locks. given_key names the key in messages.
Probe probe_key(const text* ns, const text* key, const text* given_key);

// Raises 40001 for a key (named by key_label) whose record another
// transaction recorded or changed after this transaction's snapshot.
[[noreturn]] void concurrent_change(const text* given_key);

}  // namespace idem::pg
