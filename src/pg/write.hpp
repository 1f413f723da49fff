// write.hpp: what the direct backend (write.cpp, backend.hpp's
// direct_backend) shares with the rest of the glue: the snapshot a write
// reads with, and whether a record is this transaction's claim. The writes
// themselves are the backend's; docs/internals.md ("Writing without the
// executor") says what the executor would have done and why none of it is
// lost.
#pragma once

#include "backend.hpp"
#include "store.hpp"

namespace idem::pg {

// The snapshot a statement that writes the store reads with, as UPDATE's
// or DELETE's would be: the latest under READ COMMITTED, the transaction's
// under REPEATABLE READ and SERIALIZABLE; either sees this transaction's
// own earlier writes (it increments the command counter first). Pushed as
// the active snapshot; the caller pops it. The transitions and the purge
// (purge.cpp) use it.
Snapshot push_snapshot();

// Whether the in_progress record of (ns, key), as a transition would read
// it, is the claim named (Claim::none: one this transaction claimed): what
// a transition may act on. For the SQL backend, whose statements cannot
// tell, and to tell why a transition changed nothing.
bool claimed_here(const Store& store, text* ns, text* key, const Claim& claim = Claim{Claim::none, 0});

}  // namespace idem::pg
