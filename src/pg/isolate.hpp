// isolate.hpp: one store's maintenance (a purge chunk, a statistics read)
// run so that its failure cannot undo or stop another store's: a store the
// service owns carries its owner's triggers, row security and privileges,
// which may raise, wait or sleep, and purge and the statistics cross every
// store.
#pragma once

#include "postgres.hpp"

namespace idem::pg {

// idempotency.maintenance_timeout, in milliseconds: how long one store's
// purge chunk or statistics read may run before it is cancelled and the
// store skipped; 0: no limit.
extern int maintenance_timeout_ms;

// Runs body(arg) in a subtransaction of its own, cancelled once it has run
// for idempotency.maintenance_timeout. Returns true when it finished. When
// it raised an error (or ran out of time) its work is undone, the store is
// reported in a WARNING that names it (store: InvalidOid for the
// extension's table), what was being done (action) and the SQLSTATE, the
// skip is counted (idem_stats.stores_skipped), and false is returned. Errors
// that are not the store's propagate: a cancel this session was sent, a
// write in a read-only transaction, and a serialization failure or deadlock
// under REPEATABLE READ or SERIALIZABLE (the transaction must be retried).
// body may throw C++ exceptions.
bool isolated(void (*body)(void* arg), void* arg, Oid store, const char* action);

}  // namespace idem::pg
