// citus.cpp: what Citus says about this node and its tables, and the
// refusal of store calls that Citus would run against another node's copy
// of the extension's table (see citus.hpp). What Citus's
// catalogs say is cached per backend and forgotten by the relcache
// invalidations Citus sends when they change.
#include "citus.hpp"

#include <cstring>
#include <string>

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "commands/extension.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "lib/stringinfo.h"
#include "nodes/primnodes.h"
#include "utils/rel.h"
}

#include "../core/error.hpp"
#include "text.hpp"

namespace idem::pg {

namespace {

// Whether Citus is loaded in this server: it runs only preloaded, and
// defines citus.version when it loads. Known once per backend.
enum class Loaded : char { unknown, no, yes };
Loaded citus_loaded = Loaded::unknown;

// What this database's Citus catalogs say, valid while generation has not
// moved since it was read.
struct State {
  bool valid;
  uint64 read_at;
  bool installed;       // the citus extension exists in this database
  Oid dist_object;      // pg_catalog.pg_dist_object
  Oid dist_object_key;  // its primary key (classid, objid, objsubid)
  Oid local_group;      // pg_catalog.pg_dist_local_group
  int32 group;          // this node's group: 0 on the coordinator
};
State state = {};

// Functions looked up in pg_dist_object since generation last moved.
struct Delegation {
  Oid function;
  bool delegated;
};
constexpr int cached_functions = 16;
Delegation functions[cached_functions];
int function_count = 0;

// Bumped by an invalidation of Citus's catalogs (or of every relation, or of
// any relation while they are not known yet: Citus created meanwhile).
uint64 generation = 1;

void forget_citus(Datum, Oid relid) noexcept {
  if (relid == InvalidOid || !state.valid || !state.installed || relid == state.dist_object ||
      relid == state.local_group) {
    ++generation;
    function_count = 0;
  }
}

// The column named name of tuple (of Citus's catalog rel); null is set
// when it is NULL or the catalog has no such column.
Datum column(Relation rel, HeapTuple tuple, const char* name, bool* null) {
  const AttrNumber att = get_attnum(RelationGetRelid(rel), name);
  *null = true;
  return att == InvalidAttrNumber ? 0 : heap_getattr(tuple, att, RelationGetDescr(rel), null);
}

// The int4 column named name of tuple (of rel), or fallback when NULL.
int32 int4_column(Relation rel, HeapTuple tuple, const char* name, int32 fallback, bool* is_null) {
  bool null;
  const Datum d = column(rel, tuple, name, &null);
  if (is_null != nullptr) *is_null = null;
  return null ? fallback : DatumGetInt32(d);
}

// The "char" column named name of tuple (of rel), or '\0' when NULL.
char char_column(Relation rel, HeapTuple tuple, const char* name) {
  bool null;
  const Datum d = column(rel, tuple, name, &null);
  return null ? '\0' : DatumGetChar(d);
}

// Reads this node's group from pg_dist_local_group (one row).
int32 read_group(Oid relid) {
  Relation rel = table_open(relid, AccessShareLock);
  SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, nullptr, 0, nullptr);
  const HeapTuple tuple = systable_getnext(scan);
  const int32 group = HeapTupleIsValid(tuple) ? int4_column(rel, tuple, "groupid", 0, nullptr) : 0;
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
  return group;
}

// The state, read again when an invalidation arrived since.
const State& current_state() {
  while (!state.valid || state.read_at != generation) {
    const uint64 read_at = generation;
    State s = {};
    s.installed = OidIsValid(get_extension_oid("citus", true));
    if (s.installed) {
      s.dist_object = get_relname_relid("pg_dist_object", PG_CATALOG_NAMESPACE);
      s.dist_object_key = get_relname_relid("pg_dist_object_pkey", PG_CATALOG_NAMESPACE);
      s.local_group = get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE);
      if (OidIsValid(s.local_group)) s.group = read_group(s.local_group);
    }
    s.valid = true;
    s.read_at = read_at;
    state = s;
    function_count = 0;
  }
  return state;
}

// Whether pg_dist_object has function fn as one Citus delegates: with a
// distribution argument, or colocated (with a reference or single-shard
// table, whose functions Citus delegates without an argument).
bool delegated(const State& s, Oid fn) {
  for (int i = 0; i < function_count; ++i)
    if (functions[i].function == fn) return functions[i].delegated;
  bool result = false;
  if (OidIsValid(s.dist_object) && OidIsValid(s.dist_object_key)) {
    Relation rel = table_open(s.dist_object, AccessShareLock);
    ScanKeyData keys[3];
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(ProcedureRelationId));
    ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(fn));
    ScanKeyInit(&keys[2], 3, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(0));
    SysScanDesc scan = systable_beginscan(rel, s.dist_object_key, true, nullptr, 3, keys);
    const HeapTuple tuple = systable_getnext(scan);
    if (HeapTupleIsValid(tuple)) {
      bool no_argument = true;
      (void)int4_column(rel, tuple, "distribution_argument_index", 0, &no_argument);
      const int32 colocation = int4_column(rel, tuple, "colocationid", 0, nullptr);
      result = !no_argument || colocation != 0;
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
  }
  if (function_count < cached_functions && state.read_at == generation)
    functions[function_count++] = Delegation{fn, result};
  return result;
}

// schema.name(argument types) of function fn, palloc'd: what regprocedure
// reads back whatever the search_path (types as format_type_be names them).
const char* function_signature(Oid fn) {
  StringInfoData out;
  initStringInfo(&out);
  appendStringInfo(&out, "%s.%s(", quote_identifier(get_namespace_name(get_func_namespace(fn))),
                   quote_identifier(get_func_name(fn)));
  Oid* types;
  int nargs;
  (void)get_func_signature(fn, &types, &nargs);
  for (int i = 0; i < nargs; ++i) appendStringInfo(&out, "%s%s", i > 0 ? "," : "", format_type_be(types[i]));
  appendStringInfoChar(&out, ')');
  return out.data;
}

}  // namespace

bool citus_installed() {
  if (citus_loaded == Loaded::unknown)
    citus_loaded = GetConfigOption("citus.version", true, false) != nullptr ? Loaded::yes : Loaded::no;
  return citus_loaded == Loaded::yes && current_state().installed;
}

void require_citus_13() {
  const char* version = GetConfigOption("citus.version", true, false);
  if (version != nullptr && std::strncmp(version, "13.", 3) == 0) return;
  throw core::Error(core::sqlstate::feature_not_supported,
                    "this release of the idempotency extension supports distributed stores on Citus 13",
                    std::string("This node runs Citus ") + (version != nullptr ? version : "(none)") +
                        ": the store locks a shard against moves with a lock of Citus's own, whose meaning may "
                        "change between Citus majors.",
                    "Run Citus 13, or keep the store on a table Citus does not distribute.");
}

void refuse_where_citus_would_split_the_store(FunctionCallInfo fcinfo, bool distributed) {
  if (distributed || !citus_installed()) return;
  const State& s = current_state();
  const Oid fn = fcinfo->flinfo->fn_oid;
  if (delegated(s, fn)) {
    const char* name = function_signature(fn);  // before any std::string: it may raise
    throw core::Error(core::sqlstate::feature_not_supported,
                      "cannot use the idempotency store as a function distributed by Citus",
                      std::string("Citus runs ") + name +
                          " on the node that holds its distribution argument's shard, and the store is "
                          "idempotency.idempotency_record, a local table on every node: each node would answer "
                          "from its own copy, and a key could be begun twice.",
                      std::string("Undistribute it on every node (SELECT citus_unmark_object_distributed("
                                  "'pg_proc'::regclass, '") +
                          name +
                          "'::regprocedure, 0, false) through run_command_on_all_nodes), and call the store on "
                          "the coordinator (docs/scale-out.md).");
  }
  if (s.group != 0)
    throw core::Error(core::sqlstate::feature_not_supported, "cannot use the idempotency store on a Citus worker",
                      "This node is a Citus worker (group " + std::to_string(s.group) +
                          "); the store is idempotency.idempotency_record, a local table on every node, and only "
                          "the coordinator's copy is the database's store: answering from this node's copy could "
                          "begin a key twice.",
                      "Call the store on the coordinator (docs/scale-out.md).");
}

CitusTable citus_table(Oid relid) {
  CitusTable t = {'\0', '\0', InvalidAttrNumber};
  if (!OidIsValid(get_extension_oid("citus", true))) return t;
  const Oid partition = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
  const Oid by_relid = get_relname_relid("pg_dist_partition_logical_relid_index", PG_CATALOG_NAMESPACE);
  if (!OidIsValid(partition) || !OidIsValid(by_relid)) return t;
  Relation rel = table_open(partition, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
  SysScanDesc scan = systable_beginscan(rel, by_relid, true, nullptr, 1, &key);
  const HeapTuple tuple = systable_getnext(scan);
  if (HeapTupleIsValid(tuple)) {
    t.method = char_column(rel, tuple, "partmethod");
    t.replication = char_column(rel, tuple, "repmodel");
    // partkey: the distribution column as a node (a Var), NULL for a
    // reference table.
    bool null;
    const Datum d = column(rel, tuple, "partkey", &null);
    if (!null) {
      Node* node = static_cast<Node*>(stringToNode(TextDatumGetCString(d)));
      if (node != nullptr && IsA(node, Var)) t.column = castNode(Var, node)->varattno;
    }
  }
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
  return t;
}

bool citus_manages(Oid relid) { return citus_table(relid).method != '\0'; }

bool citus_distributes(Oid relid) { return OidIsValid(relid) && citus_installed() && citus_manages(relid); }

void citus_relation_changed(Oid relid) noexcept { forget_citus(0, relid); }

void refuse_a_key_elsewhere(FunctionCallInfo fcinfo, const text* ns, Oid store, const char* what,
                            const char* hint) {
  if (citus_distributes(store))
    throw core::Error(core::sqlstate::feature_not_supported, std::string(what) + " a store Citus distributes",
                      "The store of idempotency namespace \"" + string_of(ns) +
                          "\" is distributed by Citus: the key's record and its lock are on the node that holds "
                          "the key's shard.",
                      hint);
  refuse_where_citus_would_split_the_store(fcinfo, false);
}

}  // namespace idem::pg
