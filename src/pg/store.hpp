// store.hpp: where a namespace's records are. Either the extension's own
// table, or a table the service owns that the namespace is bound to
// (idem_bind_store); the shape such a table must have; and which backend
// writes it (backend.hpp).
#pragma once

#include "citus.hpp"
#include "postgres.hpp"

extern "C" {
#include "access/genam.h"
#include "access/skey.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"
}

namespace idem::pg {

// Column numbers of a store's table: the extension's as the install scripts
// create it, and a bound table's, which must be the same.
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
  col_attempt,
  col_fence,
  col_recovery_point,
  col_recovery_state,
};

struct Backend;

// A store as one call uses it, with its table locked. Its backend
// (backend.hpp) is chosen when it is opened: direct for a table exactly as
// the install scripts make the extension's, SQL for any other.
struct Store {
  Oid table;               // the relation the records are in
  Oid pkey;                // its unique index on (namespace, key_value)
  Oid expires_index;       // its index on expires_at, when direct
  Oid owner;               // the table's owner: the store's statements run as this role
  const Backend* backend;  // how its records are written
  bool own;                // the extension's table, not a bound one
};

// The store of namespace ns, bound to table bound (InvalidOid: the
// extension's own), with its table locked in mode (RowExclusiveLock for a
// call that may write, as INSERT takes it; AccessShareLock in a read-only
// transaction) and its primary key in AccessShareLock, as they are once the
// locks are held: an index replaced while a lock was awaited (REINDEX
// CONCURRENTLY) is never used by its old OID, and what decides direct writes
// (indexes, triggers, constraints) cannot change while the lock is held.
// Raises 55000 when a bound table is gone or no longer has a store's shape.
//
// A bound table Citus distributes (by key_value or by namespace) is read
// and written in its shard for the call's routing value on this node
// (shard.hpp): key is the key as stored, hashed whether it is hashed (a
// store distributed by key_value cannot hold hashed keys: they would live
// in another shard than the one the key routes the call to), and function
// the operation ("begin", "commit", ...) for the refusal's hint.
struct Call {
  const text* key;
  bool hashed;
  const char* function;
};
Store open_store(const text* ns, Oid bound, LOCKMODE mode, const Call& call);

// The column by which a table Citus keeps (citus.hpp's CitusTable, method
// not '\0') routes a store's calls: col_namespace or col_key_value when it
// is hash-distributed by one of them with one copy of each shard;
// InvalidAttrNumber when it cannot be a store (a reference, local,
// single-shard, range or append table, another column, or replicated
// shards: each node with a copy would answer a key from its own).
AttrNumber store_routing(const CitusTable& t);

// Gives back the locks one open_store call took on store's table (in mode)
// and its primary key, for a caller about to wait for another lock that a
// holder of a stronger lock on the table may be waiting for. A lock the
// transaction held before that call stays held.
void release_store(const Store& store, LOCKMODE mode);

// The store as administration uses it, with its table locked in mode:
// open_store's for a plain table; for a table Citus distributes its shell,
// written through SQL that Citus spreads over the shards (*distributed is
// set, so that callers may go shard by shard instead: local_shards).
Store open_whole_store(const text* ns, Oid bound, LOCKMODE mode, bool* distributed);

// What is wrong with table relid as a bound store (problem NULL: nothing),
// palloc'd, for idem_bind_store's error and open_store's; fix: for a table
// of an older store's shape, the ALTER TABLE that adds what it lacks.
struct ShapeProblem {
  const char* problem;
  const char* fix;
};
ShapeProblem store_shape_problem(Oid relid);

// Scan keys for (ns, key) on the primary key index, in the index's own
// collations (ScanKeyInit's default, C, would miss rows of an index built
// with another).
void key_scan_keys(Relation index, const text* ns, const text* key, ScanKeyData (&keys)[2]);

// An index scan of the primary key for those keys under snapshot.
IndexScanDesc scan_key(Relation table, Relation index, Snapshot snapshot, ScanKeyData (&keys)[2]);

// Forgets what was learnt about a changed bound table (relcache hook, module.cpp).
void store_relation_changed(Oid relid) noexcept;

}  // namespace idem::pg
