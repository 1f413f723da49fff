// purge.hpp: one chunk of idem_purge for a store written directly
// (Store::direct), without the executor: the expired records in expires_at
// order from its index, each deleted through the table access method
// without waiting for a transaction that holds it. The statement it stands
// for, and the stores that still run it, are in store_admin.cpp;
// docs/internals.md ("Purging without the executor") says why each step is
// the statement's.
#pragma once

#include "store.hpp"

namespace idem::pg {

// The leases purge honours: a namespace's own (namespaces[i] has
// seconds[i]), else the server's idempotency.in_progress_lease. namespaces
// and seconds are the text[] and float8[] that store_admin.cpp's lease
// statement returns, or 0 when no namespace has a lease of its own.
// Seconds are date_part('epoch', lease), so a lease is a length of time.
struct Leases {
  Datum namespaces;
  Datum seconds;
  double server;
};

// Deletes up to batch expired records of store, oldest expires_at first,
// but for an in_progress record whose lease still runs, and returns how
// many; a record another transaction holds is skipped, not waited for.
// -1 when the store's expires_at index is no longer the one store names
// (replaced meanwhile): the caller runs the statement instead.
int64 purge_direct(const Store& store, int32 batch, const Leases& leases);

}  // namespace idem::pg
