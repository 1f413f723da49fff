// lock_tags.hpp: the two heavyweight locks the store takes in PostgreSQL's
// advisory lock space, and their tags: 64 bits of HMAC-SHA256 keyed with the
// store's secret, so that a role reading pg_locks can neither test a guessed
// key against a tag nor craft a key whose lock collides with another's.
#pragma once

#include "postgres.hpp"

extern "C" {
#include "storage/lock.h"
}

namespace idem::pg {

// The per-key lock, taken without waiting: tried before a begin's probe
// under the namespace lock, released after it when the begin wrote a row or
// found one, and kept to the transaction's end by a claim without a row (a
// namespace without a lease; docs/internals.md, "The store"). Its field4 is
// one PostgreSQL's own pg_advisory_* functions never use (they use 1 and
// 2), so it cannot collide with an application's advisory locks.
// try_lock_key returns false (holding nothing) when another transaction
// holds it, and the tag in *tag either way, for unlock_key or a wait. (A
// 0.4 schema has no secret: its tags are unkeyed hashes, as that release
// made them.)
bool try_lock_key(const text* ns, const text* key, LOCKTAG* tag);
void unlock_key(const LOCKTAG& tag);

// Whether a transaction holds the key's lock, found in the lock table
// without taking the lock (a look that took it, even for an instant, could
// make a concurrent begin answer in_flight). *pid: the holder's backend, 0
// for a prepared transaction. For operators (idem_key_state): it reads the
// whole lock table.
bool key_lock_holder(const text* ns, const text* key, int* pid);

// The namespace lock, held until the transaction ends: every begin holds it
// in ShareLock, and the registry functions that must see every record of
// the namespace (changing hash_keys or the store, dropping it) take
// ExclusiveLock, so they wait for the namespace's writers, and for no other
// namespace's.
void lock_namespace(const text* ns, LOCKMODE mode);

// The namespace lock if it is free now; false (and nothing held) when
// another transaction holds it in a conflicting mode.
bool try_lock_namespace(const text* ns, LOCKMODE mode);

}  // namespace idem::pg
