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

// Records that this (sub)transaction finished the record (commit, a failure,
// or forgetting it). Does nothing for a key this transaction did not claim.
void finish(const text* ns, const text* key);

}  // namespace idem::pg
