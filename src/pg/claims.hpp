// claims.hpp: the keys this transaction claimed with a fresh begin and has
// not finished yet. A transaction may not commit (or prepare) while one is
// still in progress: committed, the record would answer in_flight to every
// retry with no work behind it (the seed's inTransaction guard, enforced at
// COMMIT because a begin cannot know whether its caller will commit).
#pragma once

#include "postgres.hpp"

namespace idem::pg {

// Registers the transaction callbacks (called once from _PG_init).
void register_claim_callbacks();

// Records that this (sub)transaction inserted an in_progress record for the
// stored key in namespace ns. hashed: the stored key is the hex SHA-256 of
// the caller's key (a hash_keys namespace), which names it in the message.
void claim(const text* ns, const text* key, bool hashed);

// A claim held by the key's lock alone (docs/internals.md, "The store",
// step 4): no row is written at begin, and idem_commit or
// idem_fail_permanent inserts the finished record once, from this.
struct HeldClaim {
  int64 fence;
  TimestampTz claimed_at;
  TimestampTz expires_at;
  const bytea* request_hash;
  const Jsonb* request;  // nullptr: the namespace keeps no request
};

// Records that this (sub)transaction claimed the stored key by its lock
// alone, holding it to the transaction's end; held is copied.
void claim_held(const text* ns, const text* key, bool hashed, const HeldClaim& held);

// The open claim of (ns, key) that this transaction holds by the key's lock
// alone, or nullptr.
const HeldClaim* held_claim(const text* ns, const text* key);

// How many claims of namespace ns this transaction holds open by their lock
// alone: records in progress that no row shows, which the registry's
// checks for records (changing hash_keys or the store, dropping the
// namespace) count too.
long open_held_claims(const text* ns);

// How many keys this transaction has locked for claims held by their lock
// (finished or not: the locks are held to the end).
long held_locks();

// Records that this (sub)transaction finished the record (commit, a failure,
// or forgetting it). Does nothing for a key this transaction did not claim.
void finish(const text* ns, const text* key);

}  // namespace idem::pg
