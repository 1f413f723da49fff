// extension.cpp: the per-backend cache of the extension's own relations
// (see extension.hpp), filled with a generation counter so that OIDs of an
// installation replaced while the cache was being filled are never kept.
#include "extension.hpp"

#include <cstring>
#include <string>

extern "C" {
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "executor/tuptable.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

#include "../core/error.hpp"
#include "citus.hpp"
#include "compat.hpp"

namespace idem::pg {

namespace {

struct Relations {
  Oid table = InvalidOid;
  Oid pkey = InvalidOid;
  Registry registry = {InvalidOid, InvalidOid, InvalidOid, InvalidOid};
  Oid secret_table = InvalidOid;  // idem_lock_secret
  bool has_secret = false;
  uint8 secret[lock_secret_size] = {};
};
Relations cached;
// Bumped by every relcache invalidation, whatever relation it names: a
// lookup during which one arrived may mix two installations (a DROP and
// CREATE EXTENSION committed meanwhile, whose OIDs it cannot know yet) and is
// done again.
uint64 generation = 0;

void forget_relations(Datum, Oid relid) noexcept {
  ++generation;
  if (relid == InvalidOid || relid == cached.table || relid == cached.pkey || relid == cached.registry.config ||
      relid == cached.registry.grant || relid == cached.registry.defaults || relid == cached.secret_table)
    cached = Relations{};
}

// The owner of relation relid (InvalidOid if it is gone).
Oid owner_of(Oid relid) {
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
  if (!HeapTupleIsValid(tuple)) return InvalidOid;
  const Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
  ReleaseSysCache(tuple);
  return owner;
}

// Reads the secret from idem_lock_secret into out; false if it has no row,
// or if the table was dropped while this backend waited for its lock (the
// caller then looks everything up again).
bool read_secret(Oid relid, uint8 (&out)[lock_secret_size]) {
  Relation rel = try_relation_open(relid, AccessShareLock);
  if (rel == nullptr) return false;
  Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
  TableScanDesc scan = compat::table_beginscan(rel, snapshot, 0, nullptr);
  TupleTableSlot* slot = table_slot_create(rel, nullptr);
  bool found = false;
  if (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
    bool isnull;
    const Datum d = slot_getattr(slot, 1, &isnull);
    if (!isnull) {
      const bytea* b = DatumGetByteaPP(d);
      found = VARSIZE_ANY_EXHDR(b) == lock_secret_size;
      if (found) std::memcpy(out, VARDATA_ANY(b), lock_secret_size);
    }
  }
  ExecDropSingleTupleTableSlot(slot);
  table_endscan(scan);
  UnregisterSnapshot(snapshot);
  relation_close(rel, AccessShareLock);
  return found;
}

// One look at the catalogs; consistent is false when the primary key found
// is not the table's (an installation was replaced between the two).
// Raises 0A000 when Citus manages the store's tables: every answer would
// come from an empty shell (docs/scale-out.md).
Relations look_up(bool& consistent) {
  const Oid schema = get_namespace_oid("idempotency", true);
  Relations r;
  if (OidIsValid(schema)) {
    r.table = get_relname_relid("idempotency_record", schema);
    r.pkey = get_relname_relid("idempotency_record_pkey", schema);
  }
  if (!OidIsValid(r.table) || !OidIsValid(r.pkey))
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state, "the idempotency store is not installed",
                      "Run CREATE EXTENSION idempotency, or ALTER EXTENSION idempotency UPDATE.");
  consistent = IndexGetRelation(r.pkey, true) == r.table;
  r.registry.config = get_relname_relid("idem_namespace_config", schema);
  r.registry.grant = get_relname_relid("idem_namespace_grant", schema);
  if (!OidIsValid(r.registry.config) || !OidIsValid(r.registry.grant) ||
      get_attnum(r.registry.config, "fingerprint_ignore") == InvalidAttrNumber)
    schema_too_old();
  for (const Oid relid : {r.table, r.registry.config, r.registry.grant}) {
    const CitusTable t = citus_table(relid);
    if (t.method == '\0') continue;
    // The registry as reference tables (idem_distribute_registry): every
    // node reads its own full copy, through Citus.
    if (relid != r.table && t.method == 'n' && t.replication == 't') continue;
    const char* name = get_rel_name(relid);
    throw core::Error(core::sqlstate::feature_not_supported,
                      "the idempotency store cannot use a table that Citus manages",
                      std::string("Citus keeps the rows of idempotency.") + name +
                          " in shards (it is a distributed, reference or local-metadata table), and the table "
                          "of that name on this node is an empty shell: the store would answer from it, and "
                          "wrongly.",
                      "Keep the store's tables out of Citus; docs/scale-out.md says how to recover them.");
  }
  r.registry.defaults = get_relname_relid("idem_defaults", schema);
  r.registry.owner = owner_of(r.table);
  // 1.0.0 keeps the secret with the rest of the plumbing; 0.5.0 to 0.9 in the schema itself.
  const Oid internal = get_namespace_oid("idempotency_internal", true);
  r.secret_table = OidIsValid(internal) ? get_relname_relid("idem_lock_secret", internal) : InvalidOid;
  if (!OidIsValid(r.secret_table)) r.secret_table = get_relname_relid("idem_lock_secret", schema);
  r.has_secret = OidIsValid(r.secret_table) && read_secret(r.secret_table, r.secret);  // may accept invalidations
  return r;
}

// The store's OIDs and lock secret, looked up once per backend and again
// after any invalidation that concerns them. Returned by value: opening a
// relation accepts invalidation messages, and forget_relations may clear the
// cache between the table_open and the index_open that follow.
Relations relations() {
  if (OidIsValid(cached.table)) return cached;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    const uint64 read_at = generation;
    bool consistent;
    const Relations r = look_up(consistent);
    if (consistent && generation == read_at) {
      cached = r;
      return r;
    }
  }
}

}  // namespace

void extension_relation_changed(Oid relid) noexcept { forget_relations(0, relid); }

Registry registry() { return relations().registry; }

OwnTable own_table() {
  const Relations r = relations();
  return OwnTable{r.table, r.pkey};
}

void schema_too_old() {
  throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                    "the idempotency extension's schema is older than its library",
                    "This library serves the schemas of releases 0.9.0 and later; the database has an older one.",
                    "Run ALTER EXTENSION idempotency UPDATE.");
}

const uint8* lock_secret() {
  (void)relations();
  return cached.has_secret ? cached.secret : nullptr;
}

}  // namespace idem::pg
