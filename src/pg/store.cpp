// store.cpp: finding and checking a namespace's store (see store.hpp). What
// was learnt about each table (its primary key, its expires_at index,
// whether it may be written directly) is cached per backend, filled under
// the table's lock, and forgotten by the relcache invalidations of the table
// or its indexes; a fill during which any invalidation arrived is done again.
#include "store.hpp"

#include <cstring>
#include <initializer_list>
#include <string>

extern "C" {
#include "access/htup_details.h"
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

#include "../core/error.hpp"
#include "backend.hpp"
#include "citus.hpp"
#include "compat.hpp"
#include "extension.hpp"
#include "shard.hpp"
#include "text.hpp"

namespace idem::pg {

namespace {

// Each column as the install scripts create it: its name, type and NOT NULL,
// and its definition for the ALTER TABLE that brings an older store's shape
// up to date (a store made before 0.8.0 lacks the last columns).
struct Expected {
  const char* name;
  Oid type;
  bool not_null;
  const char* definition;
};
constexpr Expected expected_columns[col_recovery_state] = {
    {"namespace", TEXTOID, true, "text COLLATE \"C\" NOT NULL"},
    {"key_value", TEXTOID, true, "text COLLATE \"C\" NOT NULL"},
    {"status", TEXTOID, true, "text NOT NULL"},
    {"request_hash", BYTEAOID, true, "bytea NOT NULL"},
    {"request_payload", JSONBOID, false, "jsonb"},
    {"result_payload", JSONBOID, false, "jsonb"},
    {"error_payload", JSONBOID, false, "jsonb"},
    {"created_at", TIMESTAMPTZOID, true, "timestamptz NOT NULL"},
    {"updated_at", TIMESTAMPTZOID, true, "timestamptz NOT NULL"},
    {"expires_at", TIMESTAMPTZOID, true, "timestamptz NOT NULL"},
    {"attempt", INT4OID, true, "integer NOT NULL DEFAULT 1"},
    {"fence", INT8OID, false, "bigint"},
    {"recovery_point", TEXTOID, false, "text"},
    {"recovery_state", JSONBOID, false, "jsonb"},
};

// What is known of one table, keyed by its OID.
struct Known {
  Oid table;  // hash key
  Oid pkey;
  Oid expires_index;  // InvalidOid unless direct
  Oid owner;
  bool direct;
};

HTAB* known = nullptr;
// Bumped by every relcache invalidation: a fill during which it moved may
// have read a table that was changed meanwhile, and is done again.
uint64 generation = 0;

void forget_tables(Datum, Oid relid) noexcept {
  ++generation;
  if (known == nullptr) return;
  HASH_SEQ_STATUS seq;
  hash_seq_init(&seq, known);
  while (auto* k = static_cast<Known*>(hash_seq_search(&seq)))
    if (relid == InvalidOid || k->table == relid || k->pkey == relid || k->expires_index == relid)
      (void)hash_search(known, &k->table, HASH_REMOVE, nullptr);
}

HTAB* known_tables() {
  if (known != nullptr) return known;
  HASHCTL ctl;
  std::memset(&ctl, 0, sizeof ctl);
  ctl.keysize = sizeof(Oid);
  ctl.entrysize = sizeof(Known);
  ctl.hcxt = CacheMemoryContext;
  known = hash_create("idempotency stores", 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
  return known;
}

// Whether index indexrelid is a plain btree index on exactly the columns
// columns (no expression, no predicate, unique as asked).
bool plain_btree(Oid indexrelid, std::initializer_list<AttrNumber> columns, bool unique) {
  HeapTuple tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexrelid));
  if (!HeapTupleIsValid(tuple)) return false;
  const auto* index = reinterpret_cast<Form_pg_index>(GETSTRUCT(tuple));
  bool plain = index->indisunique == unique && index->indnatts == static_cast<int>(columns.size()) &&
               index->indisvalid && index->indisready && !index->indisexclusion && index->indimmediate &&
               heap_attisnull(tuple, Anum_pg_index_indexprs, nullptr) &&
               heap_attisnull(tuple, Anum_pg_index_indpred, nullptr);
  int i = 0;
  for (AttrNumber column : columns) plain = plain && index->indkey.values[i++] == column;
  ReleaseSysCache(tuple);
  tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(indexrelid));
  if (!HeapTupleIsValid(tuple)) return false;
  plain = plain && reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relam == BTREE_AM_OID;
  ReleaseSysCache(tuple);
  return plain;
}

// The table's unique index on (namespace, key_value): its primary key if
// that is one, else another such index; InvalidOid when it has none.
Oid key_index(Relation rel) {
  if (OidIsValid(rel->rd_pkindex) && plain_btree(rel->rd_pkindex, {col_namespace, col_key_value}, true))
    return rel->rd_pkindex;
  List* indexes = RelationGetIndexList(rel);
  Oid found = InvalidOid;
  for (ListCell* cell = list_head(indexes); cell != nullptr && !OidIsValid(found); cell = lnext(indexes, cell))
    if (plain_btree(lfirst_oid(cell), {col_namespace, col_key_value}, true)) found = lfirst_oid(cell);
  list_free(indexes);
  return found;
}

// The expires_at index when the store's rows may be written through heapam
// directly (write.cpp): a heap table of exactly the fourteen columns, no
// trigger, rule, row security or CHECK constraint, and no index but the key
// and the one on expires_at, both plain btrees. Anything an operator added
// makes it InvalidOid, and the writes go through SQL, which honours it.
Oid direct_index(Relation rel, Oid pkey) {
  const TupleDesc desc = RelationGetDescr(rel);
  bool plain = rel->rd_rel->relam == HEAP_TABLE_AM_OID && rel->rd_rel->relkind == RELKIND_RELATION &&
               rel->trigdesc == nullptr && rel->rd_rules == nullptr && !rel->rd_rel->relrowsecurity &&
               !rel->rd_rel->relforcerowsecurity &&
               desc->natts == col_recovery_state &&
               (desc->constr == nullptr || desc->constr->num_check == 0);
  for (int i = 0; plain && i < desc->natts; ++i) {
    const Form_pg_attribute att = TupleDescAttr(desc, i);
    plain = !att->attisdropped && att->atttypid == expected_columns[i].type &&
            att->attnotnull == expected_columns[i].not_null && att->attidentity == '\0' &&
            att->attgenerated == '\0';
  }
  Oid expires = InvalidOid;
  List* indexes = plain ? RelationGetIndexList(rel) : NIL;
  plain = plain && list_length(indexes) == 2;
  if (plain) {
    for (ListCell* cell = list_head(indexes); cell != nullptr; cell = lnext(indexes, cell))
      if (lfirst_oid(cell) != pkey) expires = lfirst_oid(cell);
    plain = OidIsValid(expires) && plain_btree(expires, {col_expires_at}, false);
  }
  list_free(indexes);
  return plain ? expires : InvalidOid;
}

// What makes rel no table a store can be, whatever its columns (nullptr:
// nothing).
const char* table_problem(Relation rel) {
  const char* name = RelationGetRelationName(rel);
  if (rel->rd_rel->relkind != RELKIND_RELATION) return psprintf("%s is not a plain table.", name);
  if (rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT) {
    const bool unlogged = rel->rd_rel->relpersistence == RELPERSISTENCE_UNLOGGED;
    return psprintf("%s is %s: a crash%s would lose records that were committed, and their retries would begin "
                    "again.",
                    name, unlogged ? "unlogged" : "temporary", unlogged ? "" : " or the end of its session");
  }
  if (has_superclass(RelationGetRelid(rel)) || find_inheritance_children(RelationGetRelid(rel), NoLock) != NIL)
    return psprintf("%s takes part in table inheritance: statements on it would reach other tables' rows (or miss "
                    "its own).",
                    name);
  return nullptr;
}

// A table with the first `have` columns right and none after: an older
// store's shape, with the ALTER TABLE that adds the rest.
ShapeProblem older_shape(Relation rel, int have) {
  const char* name = RelationGetRelationName(rel);
  StringInfoData why, fix;
  initStringInfo(&why);
  initStringInfo(&fix);
  if (have == 0)
    appendStringInfo(&why, "%s has no columns; a store needs", name);
  else
    appendStringInfo(&why, "%s has the columns of an older store's shape, up to %s; this release needs", name,
                     expected_columns[have - 1].name);
  appendStringInfo(&fix, "Add them: ALTER TABLE %s",
                   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)), name));
  for (int j = have; j < col_recovery_state; ++j) {
    appendStringInfo(&why, "%s %s", j == have ? "" : ",", expected_columns[j].name);
    appendStringInfo(&fix, "%s ADD COLUMN %s %s", j == have ? "" : ",", expected_columns[j].name,
                     expected_columns[j].definition);
  }
  appendStringInfoString(&why, have == 0 ? "." : " too.");
  appendStringInfoChar(&fix, ';');
  return {why.data, fix.data};
}

// What is wrong with column i (0-based) of rel, present in its descriptor
// (nullptr: nothing).
const char* column_problem(Relation rel, int i) {
  const char* name = RelationGetRelationName(rel);
  const Expected& e = expected_columns[i];
  const Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);
  if (att->attisdropped)  // its place stays taken: adding it again puts it last
    return psprintf("Column %d of %s must be %s, and was dropped: a store's columns are at fixed places, so one "
                    "dropped cannot be added again. Copy the rows into a table idem_create_store makes.",
                    i + 1, name, e.name);
  if (std::strcmp(NameStr(att->attname), e.name) != 0) return psprintf("Column %d of %s must be %s.", i + 1, name, e.name);
  if (att->atttypid != e.type)
    return psprintf("Column %s of %s must be of type %s, not %s.", e.name, name, format_type_be(e.type),
                    format_type_be(att->atttypid));
  if (att->attnotnull != e.not_null)
    return psprintf("Column %s of %s must %sbe NOT NULL.", e.name, name, e.not_null ? "" : "not ");
  if ((i == col_namespace - 1 || i == col_key_value - 1) && OidIsValid(att->attcollation) &&
      !get_collation_isdeterministic(att->attcollation))
    return psprintf("Column %s of %s has a nondeterministic collation: keys must compare by their bytes.", e.name,
                    name);
  return nullptr;
}

// What is wrong with rel's unique index on (namespace, key_value): none, or
// one whose own collations do not compare by bytes (the index decides which
// keys are the same, whatever the columns' collations).
const char* key_index_problem(Relation rel) {
  const char* name = RelationGetRelationName(rel);
  const Oid key = key_index(rel);
  if (!OidIsValid(key))
    return psprintf("%s has no valid unique index on (namespace, key_value), such as its primary key.", name);
  Relation index = index_open(key, AccessShareLock);
  bool deterministic = true;
  for (int i = 0; i < 2; ++i)
    deterministic = deterministic && (!OidIsValid(index->rd_indcollation[i]) ||
                                      get_collation_isdeterministic(index->rd_indcollation[i]));
  index_close(index, AccessShareLock);
  if (deterministic) return nullptr;
  return psprintf("The unique index of %s on (namespace, key_value) has a nondeterministic collation: keys must "
                  "compare by their bytes.",
                  name);
}

// Nothing when rel has a bound store's shape, else what is wrong (palloc'd).
ShapeProblem shape_problem(Relation rel) {
  if (const char* why = table_problem(rel)) return {why, nullptr};
  for (int i = 0; i < col_recovery_state; ++i) {
    if (i >= RelationGetDescr(rel)->natts) return older_shape(rel, i);  // every column so far is right
    if (const char* why = column_problem(rel, i)) return {why, nullptr};
  }
  return {key_index_problem(rel), nullptr};
}

// How a message names a store: by its namespace, or, for the
// administration functions, which act on a table for every namespace, by
// the table. Call it only inside the throw expression.
std::string store_subject(const text* ns, const char* table) {
  if (VARSIZE_ANY_EXHDR(ns) > 0) return "the store of idempotency namespace \"" + string_of(ns) + "\"";
  return std::string("the idempotency store ") + (table != nullptr ? table : "(dropped)");
}

// What is known of table relid, which is locked: read from the catalogs
// when not cached. own: the extension's table, whose shape the install
// scripts made.
Known know(Oid relid, bool own, Oid own_pkey, const text* ns) {
  if (auto* k = static_cast<Known*>(hash_search(known_tables(), &relid, HASH_FIND, nullptr))) return *k;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    const uint64 read_at = generation;
    Relation rel = table_open(relid, NoLock);
    Known k{relid, InvalidOid, InvalidOid, rel->rd_rel->relowner, false};
    // The extension's own table is as the scripts make it, but for what an
    // operator may still change: its persistence (unlogged, a crash would
    // lose committed records) and inheritance.
    const ShapeProblem problem = own ? ShapeProblem{table_problem(rel), nullptr} : shape_problem(rel);
    if (problem.problem == nullptr) {
      k.pkey = own ? own_pkey : key_index(rel);
      k.expires_index = direct_index(rel, k.pkey);
      k.direct = OidIsValid(k.expires_index);
#ifdef IDEM_MEASURE_NO_DIRECT_WRITES  // bench: the same calls through SPI alone
      k.direct = false;
#endif
    }
    table_close(rel, NoLock);
    const char* table = problem.problem != nullptr ? get_rel_name(relid) : nullptr;  // before any std::string
    if (problem.problem != nullptr)
      throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                        store_subject(ns, table) + " cannot be used",
                        problem.problem,
                        problem.fix != nullptr ? problem.fix
                                               : "docs/api.md gives the table a store needs; fix it, or bind the "
                                                 "namespace to another store with idem_bind_store.");
    if (generation != read_at) continue;
    *static_cast<Known*>(hash_search(known_tables(), &relid, HASH_ENTER, nullptr)) = k;
    return k;
  }
}

// Whether the relation relid exists.
bool exists(Oid relid) { return SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)); }

}  // namespace

AttrNumber store_routing(const CitusTable& t) {
  if (t.method != 'h' || t.replication != 's') return InvalidAttrNumber;
  return t.column == col_namespace || t.column == col_key_value ? t.column : InvalidAttrNumber;
}

namespace {

// The table a call on bound table bound reads and writes: bound itself, or
// for a table Citus distributes, the shard of the call's routing value here.
Oid call_table(const text* ns, Oid bound, const Call& call) {
  if (!OidIsValid(bound) || !citus_installed()) return bound;
  const CitusTable t = citus_table(bound);
  if (t.method == '\0') return bound;
  const char* name = get_rel_name(bound);
  const char* schema = get_namespace_name(get_rel_namespace(bound));
  if (store_routing(t) == InvalidAttrNumber)
    throw core::Error(core::sqlstate::feature_not_supported,
                      "the store of idempotency namespace \"" + string_of(ns) + "\" is a Citus table of a kind it "
                      "cannot use",
                      std::string(name != nullptr ? name : "?") +
                          " is not hash-distributed by key_value or by namespace with one copy of each shard (it "
                          "is a reference, local, single-shard, range or append table, distributed by another "
                          "column, or its shards are replicated: each node with a copy would answer a key).",
                      "Distribute it with create_distributed_table(table, 'key_value') or (table, 'namespace') "
                      "with citus.shard_replication_factor = 1; a table with replicated shards: "
                      "alter_distributed_table(table, colocate_with := 'none') with that setting "
                      "(docs/scale-out.md).");
  if (t.column == col_key_value && call.hashed)
    throw core::Error(core::sqlstate::feature_not_supported,
                      "idempotency namespace \"" + string_of(ns) + "\" cannot hash its keys in a store distributed "
                      "by key",
                      "Its store is distributed by key_value, and a hashed key would be kept in the shard of its "
                      "hash, not in the shard the key routes the call to.",
                      "Distribute the store by namespace, or use a namespace without hash_keys.");
  const char* entry_point = quote_qualified_identifier(
      schema, psprintf("%s_%s", name != nullptr ? name : "store", call.function));
  return local_shard(ns, bound, t.column == col_namespace ? ns : call.key,
                     psprintf("%s (made by idem_create_entry_points)", entry_point));
}

// The store in table bound (InvalidOid: the extension's), locked as
// open_store describes: the table itself, never a shard of it.
Store open_table(const text* ns, Oid bound, LOCKMODE mode) {
  for (;;) {
    const bool own = !OidIsValid(bound);
    OwnTable extension{};
    if (own) extension = own_table();
    const Oid table = own ? extension.table : bound;
    LockRelationOid(table, mode);
    if (!own && !exists(table))
      throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                        store_subject(ns, nullptr) + " no longer exists",
                        "The table the namespace is bound to was dropped, and its records with it.",
                        "Bind the namespace to another store with idem_bind_store, or to the extension's table "
                        "with idem_bind_store(namespace, NULL).");
    // The lock accepted any invalidation that came meanwhile: the caches now
    // say whether the table or its primary key was replaced before it was
    // granted (another installation, a rebuilt index).
    if (own && (own_table().table != table || !exists(table))) {
      UnlockRelationOid(table, mode);
      continue;
    }
    const Known k = know(table, own, own ? own_table().pkey : InvalidOid, ns);
    LockRelationOid(k.pkey, AccessShareLock);
    const bool same = own ? own_table().pkey == k.pkey && exists(k.pkey)
                          : exists(k.pkey) && IndexGetRelation(k.pkey, true) == table &&
                                hash_search(known_tables(), &table, HASH_FIND, nullptr) != nullptr;
    if (!same) {
      UnlockRelationOid(k.pkey, AccessShareLock);
      UnlockRelationOid(table, mode);
      continue;
    }
    return Store{table, k.pkey, k.expires_index, own ? registry().owner : k.owner,
                 k.direct ? &direct_backend : &sql_backend, own};
  }
}

}  // namespace

Store open_store(const text* ns, Oid bound, LOCKMODE mode, const Call& call) {
  return open_table(ns, call_table(ns, bound, call), mode);
}

void release_store(const Store& store, LOCKMODE mode) {
  UnlockRelationOid(store.pkey, AccessShareLock);
  UnlockRelationOid(store.table, mode);
}

Store open_whole_store(const text* ns, Oid bound, LOCKMODE mode, bool* distributed) {
  *distributed = citus_distributes(bound);
  Store store = open_table(ns, bound, mode);
  // A Citus shell holds no rows: its statements go through Citus, never
  // to its heap.
  if (*distributed) store.backend = &sql_backend, store.expires_index = InvalidOid;
  return store;
}

ShapeProblem store_shape_problem(Oid relid) {
  Relation rel = table_open(relid, AccessShareLock);
  const ShapeProblem problem = shape_problem(rel);
  table_close(rel, AccessShareLock);
  return problem;
}


void key_scan_keys(Relation index, const text* ns, const text* key, ScanKeyData (&keys)[2]) {
  const Datum values[2] = {PointerGetDatum(ns), PointerGetDatum(key)};
  for (int i = 0; i < 2; ++i)
    ScanKeyEntryInitialize(&keys[i], 0, i + 1, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[i],
                           F_TEXTEQ, values[i]);
}

IndexScanDesc scan_key(Relation table, Relation index, Snapshot snapshot, ScanKeyData (&keys)[2]) {
  IndexScanDesc scan = compat::index_beginscan(table, index, snapshot, 2, 0);
  index_rescan(scan, keys, 2, nullptr, 0);
  return scan;
}

void store_relation_changed(Oid relid) noexcept { forget_tables(0, relid); }

}  // namespace idem::pg
