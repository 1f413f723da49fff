// write.hpp: the store's three row writes (claim, finish, forget) through
// heapam and the index access methods, without the executor, for a table
// exactly as the install scripts make the extension's (Store::direct). Each is the
// statement it replaces, with the same locks, visibility and concurrency
// rules; docs/internals.md says what the executor would have done and why
// none of it is lost.
#pragma once

#include "claims.hpp"
#include "store.hpp"

namespace idem::pg {

// The snapshot a statement that writes the store reads with, as UPDATE's
// or DELETE's would be: the latest under READ COMMITTED, the transaction's
// under REPEATABLE READ and SERIALIZABLE; either sees this transaction's
// own earlier writes (it increments the command counter first). Pushed as
// the active snapshot; the caller pops it. The transitions and the purge
// (purge.cpp) use it.
Snapshot push_snapshot();

// Inserts the fresh in_progress record claimed at now, expiring at now +
// window, and returns the fence it drew. request is NULL when the
// namespace keeps no request. The caller holds the key's lock and has seen
// no row for it.
int64 insert_claim(const Store& store, text* ns, text* key, Datum request_hash, Jsonb* request,
                   TimestampTz now, Interval* window);

// Inserts the finished record (status 'c' with the result, or 'f' with the
// error payload) of a claim held by the key's lock alone, finished at the
// current clock: the one write of a fresh attempt in a namespace without a
// lease. The caller holds the key's lock. keep_request: the namespace keeps
// requests now (it may have been switched off since the claim).
void insert_finished(const Store& store, text* ns, text* key, const HeldClaim& held, bool committing,
                     Jsonb* payload, bool keep_request);

// Which in_progress record a transition may change: any (none), or only the
// one at this attempt (0.4's proof) or drawn with this fence (0.5's).
struct Claim {
  enum Kind { none, attempt, fence } kind;
  int64 value;
};

// Moves the matching in_progress record to status 'c' (result) or 'f'
// (error), with updated_at the current clock; false when no record matches.
// Under READ COMMITTED a record changed by a transaction that committed
// meanwhile is looked at again, as UPDATE does; under REPEATABLE READ and
// SERIALIZABLE that raises 40001, as UPDATE does.
bool finish_claim(const Store& store, text* ns, text* key, const Claim& claim, bool committing, Jsonb* payload);

// Deletes the matching in_progress record (idem_fail_transient), with the
// same rules; false when none matches, or when it was taken over or has a
// recovery point (*kept set: its work may have had effects).
bool forget_claim(const Store& store, text* ns, text* key, const Claim& claim, bool* kept);

// Whether the in_progress record of (ns, key), as a transition would read
// it, is the claim named (Claim::none: one this transaction claimed): what
// a transition may act on. For the SQL path, whose statements cannot tell,
// and to tell why one changed nothing.
bool claimed_here(const Store& store, text* ns, text* key, const Claim& claim = Claim{Claim::none, 0});

}  // namespace idem::pg
