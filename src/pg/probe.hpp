// probe.hpp: the look at one key that answers a begin, through the store's
// primary key with a dirty snapshot, which sees rows of transactions still
// in progress without waiting for them.
#pragma once

#include "../core/decide.hpp"
#include "postgres.hpp"
#include "policy.hpp"
#include "store.hpp"

extern "C" {
#include "executor/tuptable.h"
}

namespace idem::pg {

// What the probe found for one (namespace, key): core::Found's three.
using Found = core::Found;

struct Probe {
  Found found;
  TransactionId busy_xid;  // busy: the transaction inserting, updating or deleting the row
  // row: the latest committed version (or this transaction's own), copied
  // by probe_key (probe_in_place: in its prober's slot)
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
  TransactionId xmin;      // row: the transaction that wrote this version (its raw xmin), or invalid
  bool frozen;             // row: the version is frozen (its xmin kept, maybe 2^31 transactions old)
};

// An index scan of a store's primary key with a dirty snapshot, for the
// keys of one namespace, kept open so that a batch looks at each of its
// keys by rescanning it, rather than beginning and ending a scan per key
// (about 2,500 instructions each).
struct Prober {
  MemoryContext context;  // the scan's, in which every call into it runs
  Relation table;
  Relation index;
  ScanKeyData keys[2];  // namespace and key; each probe sets the key's
  SnapshotData dirty;   // the scan's snapshot: it must not move
  IndexScanDesc scan;
  TupleTableSlot* slot;
};

// A prober of namespace ns in store (opened and locked by open_store),
// palloc'd in the current memory context; close_prober ends it. An error
// between the two leaves it to the transaction's (or subtransaction's)
// abort, which releases its pins and references.
Prober* open_prober(const Store& store, const text* ns);
void close_prober(Prober* prober);

// What probe_key finds, through prober, without copying the row's values:
// they point into the prober's slot, valid until its next probe or its
// close.
Probe probe_in_place(Prober* prober, const text* key, const text* given_key, bool check_snapshot = true);

// Looks the key up in store (opened and locked by open_store) through its
// primary key with a dirty snapshot: a row another transaction has not
// finished writing is "busy" (in flight elsewhere). Otherwise the row is
// committed (or this transaction's own). Under REPEATABLE READ and
// SERIALIZABLE a committed row that the transaction's snapshot does not see
// raises 40001, as INSERT ... ON CONFLICT does, and SERIALIZABLE registers
// the read with predicate locks. given_key names the key in messages.
// check_snapshot false: neither (an operator's look, idem_key_state, must
// neither fail nor take part in serializable snapshot isolation).
Probe probe_key(const Store& store, const text* ns, const text* key, const text* given_key,
                bool check_snapshot = true);

// Whether a first look, taken without the namespace's lock, may answer
// from p, a row it found: this transaction's own, or a version committed
// before the statement's snapshot was taken. Such a version existed, and
// its namespace had a record, from before the caller read the namespace's
// policy until the probe; hash_keys, the pointers and the store cannot
// change while a namespace has records, so that policy was in force when
// the probe looked. A version committed since may have been written under a
// policy changed and changed back meanwhile (and a key of another form
// found): such a key is decided under the namespace's lock instead.
bool answerable_unlocked(const Probe& p);

// Whether the first look's p is final and answers there (core::
// final_without_locks): a committed or failed row answerable_unlocked.
bool final_unlocked(const Probe& p);

// From when an in_progress record that another transaction committed (p, a
// row) may be taken over: once its namespace's lease has run out since it
// was claimed (or last extended), or, with no lease (left by an older
// release, which let autocommit callers commit a claim, or by a lease since
// removed), once its replay window has. A begin takes over such a record;
// idem_release_key releases no other.
TimestampTz takeover_from(const Probe& p, const Policy& policy);

// The backend running xid, which may be a subtransaction's (a claim made
// under a savepoint or in a PL/pgSQL block with an EXCEPTION clause: the
// process array lists only top-level transactions); 0 when none runs it
// (it ended, or it is a prepared transaction). xid is a busy_xid the probe
// saw running after this transaction's snapshot was taken.
int backend_of(TransactionId xid);

// Raises 40001 for a key (named by key_label) whose record another
// transaction recorded or changed after this transaction's snapshot.
[[noreturn]] void concurrent_change(const text* given_key);

}  // namespace idem::pg
