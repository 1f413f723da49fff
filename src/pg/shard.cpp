// shard.cpp: finding a distributed store's shard on this node (see
// shard.hpp), through Citus's own functions and catalogs, as the
// extension's owner: get_shard_id_for_distribution_column hashes the value
// as Citus routes it, lock_shard_metadata takes the lock Citus's writes and
// shard moves take, and pg_dist_placement, read with a new snapshot once
// the lock is held, says whether the shard is here.
#include "shard.hpp"

#include <string>

extern "C" {
#include "nodes/pg_list.h"
#include "utils/inval.h"
}

#include "../core/error.hpp"
#include "citus.hpp"
#include "spi.hpp"
#include "text.hpp"

namespace idem::pg {

namespace {

Statement shard_of = {
    "SELECT pg_catalog.get_shard_id_for_distribution_column($1::pg_catalog.regclass, $2::pg_catalog.text)",
    2,
    {OIDOID, TEXTOID},
    nullptr};

// ShareLock (5), as Citus's own writes take it; a move takes ExclusiveLock.
Statement lock_shard = {"SELECT pg_catalog.lock_shard_metadata(5, ARRAY[$1::pg_catalog.int8])", 1, {INT8OID}, nullptr};

// Whether shard $1 of table $2 is placed on this node, its relation here
// (NULL when it is not), and the node that holds it.
Statement placement = {
    "SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_placement p, pg_catalog.pg_dist_local_group l"
    "               WHERE p.shardid OPERATOR(pg_catalog.=) $1 AND p.groupid OPERATOR(pg_catalog.=) l.groupid),"
    " pg_catalog.to_regclass(pg_catalog.shard_name($2::pg_catalog.regclass, $1, false))::pg_catalog.oid,"
    " (SELECT n.nodename OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) n.nodeport::pg_catalog.text"
    "  FROM pg_catalog.pg_dist_placement p JOIN pg_catalog.pg_dist_node n"
    "    ON n.groupid OPERATOR(pg_catalog.=) p.groupid"
    "  WHERE p.shardid OPERATOR(pg_catalog.=) $1 ORDER BY n.noderole OPERATOR(pg_catalog.=) 'primary' DESC LIMIT 1)",
    2,
    {INT8OID, OIDOID},
    nullptr,
    true};

// The shards of table $1 placed on this node.
Statement placed_here = {
    "SELECT pg_catalog.array_agg(s.shardid ORDER BY s.shardid)"
    " FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_placement p"
    "   ON p.shardid OPERATOR(pg_catalog.=) s.shardid"
    " JOIN pg_catalog.pg_dist_local_group l ON p.groupid OPERATOR(pg_catalog.=) l.groupid"
    " WHERE s.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
    1,
    {OIDOID},
    nullptr,
    true};

// The shard id for value.
int64 shard_id(Oid store, const text* value) {
  const Datum values[2] = {ObjectIdGetDatum(store), PointerGetDatum(value)};
  Datum row[1];
  bool nulls[1] = {true};
  (void)execute(shard_of, values, "  ", row, nulls);
  if (nulls[0])
    throw core::Error(core::sqlstate::internal_error, "Citus found no shard for an idempotency key",
                      "get_shard_id_for_distribution_column returned NULL.");
  return DatumGetInt64(row[0]);
}

// Where shard is, with the lock on its metadata held.
struct Placed {
  bool here;
  Oid relation;
  const char* node;  // palloc'd, or nullptr
};

Placed locked(Oid store, int64 shard) {
  const Datum id[1] = {Int64GetDatum(shard)};
  (void)execute(lock_shard, id, " ");
  // A move or split that held the lock has committed by now: its catalog
  // changes are read from here on (the placement with a new snapshot).
  AcceptInvalidationMessages();
  const Datum values[2] = {Int64GetDatum(shard), ObjectIdGetDatum(store)};
  Datum row[3];
  bool nulls[3] = {true, true, true};
  (void)execute(placement, values, "  ", row, nulls);
  Placed p = {!nulls[0] && DatumGetBool(row[0]), nulls[1] ? InvalidOid : DatumGetObjectId(row[1]),
              nulls[2] ? nullptr : TextDatumGetCString(row[2])};
  return p;
}

}  // namespace

Oid local_shard(const text* ns, Oid store, const text* value, const char* entry_point) {
  require_citus_13();
  // A split between the lookup and the lock leaves the value in another
  // shard: look it up again under the lock, until it stays.
  int64 shard = shard_id(store, value);
  for (int round = 0;; ++round) {
    CHECK_FOR_INTERRUPTS();
    const Placed p = locked(store, shard);
    const int64 again = shard_id(store, value);
    if (again != shard) {
      if (round >= 3)
        throw core::Error(core::sqlstate::serialization_failure,
                          "the shards of an idempotency store changed during the call",
                          "Citus split or moved them again and again while the call looked for its shard.",
                          "Retry the transaction.");
      shard = again;
      continue;
    }
    if (p.here && OidIsValid(p.relation)) return p.relation;
    char* table = get_rel_name(store);
    throw core::Error(
        core::sqlstate::feature_not_supported,
        "this key of idempotency namespace \"" + string_of(ns) + "\" is kept on another node",
        std::string("Its store, ") + (table != nullptr ? table : "?") + ", is distributed by Citus, and shard " +
            std::to_string(shard) + " that holds it is on " + (p.node != nullptr ? p.node : "no node") +
            ", not on this one: a call is answered only where its shard is.",
        std::string("Call ") + entry_point +
            " as SELECT ... FROM that function with constant arguments: Citus runs it on the node of the shard "
            "(inside a transaction block too, as it was distributed with force_delegation). Retry after a "
            "shard move.");
  }
}

List* local_shards(Oid store) {
  require_citus_13();
  const Datum values[1] = {ObjectIdGetDatum(store)};
  Datum row[1];
  bool nulls[1] = {true};
  (void)execute(placed_here, values, " ", row, nulls);
  if (nulls[0]) return NIL;
  ArrayType* ids = DatumGetArrayTypeP(row[0]);
  Datum* shards;
  int count;
  deconstruct_array(ids, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &shards, nullptr, &count);
  List* relations = NIL;
  for (int i = 0; i < count; ++i) {
    const Placed p = locked(store, DatumGetInt64(shards[i]));
    if (p.here && OidIsValid(p.relation)) relations = lappend_oid(relations, p.relation);
  }
  return relations;
}

}  // namespace idem::pg
