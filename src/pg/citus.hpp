// citus.hpp: where Citus would run a store call. The store is the
// extension's table, and under Citus every node has a copy of it: only the
// coordinator's is the database's store. A call that Citus runs on a worker
// (a store function it delegates, or any call on a worker) would answer from
// that node's own copy, and a key could be begun twice.
#pragma once

#include "postgres.hpp"

namespace idem::pg {

// Raises 0A000 when the function called (fcinfo's) is one Citus delegates
// (create_distributed_function with a distribution argument or a
// colocation), or when this node is a Citus worker. Costs one pointer test
// where Citus is not loaded, and a cached answer where it is.
void refuse_where_citus_would_split_the_store(FunctionCallInfo fcinfo);

// Whether Citus keeps relid in its metadata on this node (a distributed,
// reference or local-metadata table): then it keeps the rows in shard
// tables, and the relation of that name here is an empty shell.
bool citus_manages(Oid relid);

// Forgets what was read from Citus's catalogs when they change (relcache hook, module.cpp).
void citus_relation_changed(Oid relid) noexcept;

}  // namespace idem::pg
