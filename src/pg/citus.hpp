// citus.hpp: what Citus says about this node and its tables. The
// extension's table has a copy on every node, and only the coordinator's is
// the database's store: a call that Citus runs on a worker (a store
// function it delegates, or any call on a worker) would answer from that
// node's own copy, and a key could be begun twice. A store Citus
// distributes is another matter: its calls belong where the key's shard is.
#pragma once

#include "postgres.hpp"

namespace idem::pg {

// Raises 0A000 when the function called (fcinfo's) is one Citus delegates
// (create_distributed_function with a distribution argument or a
// colocation), or when this node is a Citus worker, unless the namespace's
// store is a table Citus distributes (distributed: then the call belongs
// where the key's shard is, shard.hpp). Costs one pointer test where Citus
// is not loaded, and a cached answer where it is.
void refuse_where_citus_would_split_the_store(FunctionCallInfo fcinfo, bool distributed);

// For an operator's function that works on one key where it is (what
// names the function and what it cannot do there, "idem_key_state cannot
// look at"): raises 0A000 when Citus distributes the namespace's store
// (the key's row and lock are on the node of its shard; hint: what to do
// there), and refuse_where_citus_would_split_the_store's refusals.
void refuse_a_key_elsewhere(FunctionCallInfo fcinfo, const text* ns, Oid store, const char* what,
                            const char* hint);

// How Citus keeps relid on this node, read from pg_dist_partition: method
// '\0' when it does not (a plain table), else its partmethod ('h': hash
// distributed; 'n': a reference table, replication 't', or a local-metadata
// one) and replication model; for a distributed table the attribute number
// of its distribution column. Citus keeps such a table's rows in shard
// tables: the relation of its name is an empty shell.
struct CitusTable {
  char method;
  char replication;
  AttrNumber column;
};
CitusTable citus_table(Oid relid);

// Whether Citus keeps relid in its metadata on this node (citus_table's
// method is not '\0').
bool citus_manages(Oid relid);

// Whether Citus is loaded in this server and installed in this database.
bool citus_installed();

// Whether relid is a table Citus keeps in its metadata here (InvalidOid:
// false): a store's calls then go to its shards (shard.hpp).
bool citus_distributes(Oid relid);

// Raises 0A000 unless this node runs the Citus major the distributed store
// was written for (13): the shard metadata lock it takes (shard.cpp) is one
// of Citus's internals.
void require_citus_13();

// Forgets what was read from Citus's catalogs when they change (relcache hook, module.cpp).
void citus_relation_changed(Oid relid) noexcept;

}  // namespace idem::pg
