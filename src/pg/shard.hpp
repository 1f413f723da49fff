// shard.hpp: the shard of a store Citus distributes, on this node. A
// distributed store's records live in shard tables; a call is answered from
// the shard that holds its routing value (the key, or the namespace), only
// on a node that holds that shard, and under Citus's lock on the shard's
// metadata, which a shard move or split takes before it changes where the
// shard is. Anything else is refused, never answered from elsewhere.
#pragma once

#include "postgres.hpp"

namespace idem::pg {

// The relation of the shard of distributed table store that holds value
// (its distribution column's value), placed on this node. Takes Citus's
// shard metadata lock in ShareLock, held until the transaction ends (a move
// or split of the shard waits for this transaction), and looks again after
// it was granted. Raises 0A000 when the shard is placed on another node;
// entry_point names the function that runs where the shard is, for the hint.
Oid local_shard(const text* ns, Oid store, const text* value, const char* entry_point);

// The shards of distributed table store placed on this node, each locked as
// local_shard does: a palloc'd list of relation OIDs (NIL when none).
List* local_shards(Oid store);

}  // namespace idem::pg
