// policy.cpp: the per-backend cache of the namespace registry and the
// access check. The cache is a hash table in its own memory context, filled
// on first use of a namespace, and cleared whole when either registry table
// changes (their triggers send a relcache invalidation) or when it holds too
// many namespaces.
#include "policy.hpp"

#include <cstdio>
#include <cstring>

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "utils/acl.h"
#include "storage/lmgr.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include "../core/error.hpp"
#include "../core/hex.hpp"
#include "../core/namespace.hpp"
#include "../core/sha256.hpp"
#include "citus.hpp"
#include "guard.hpp"
#include "extension.hpp"
#include "lock_tags.hpp"
#include "pointers.hpp"
#include "settings.hpp"
#include "spi.hpp"
#include "text.hpp"

namespace idem::pg {

namespace {

// More distinct namespaces than this in one backend clear the cache, so that
// calls with made-up namespaces cannot grow it without bound.
constexpr long max_cached_namespaces = 1024;

// What the registry says about one namespace; NULL settings are has_* false.
struct Entry {
  char name[core::max_namespace_length + 1];  // hash key, NUL-padded
  bool registered;
  bool hash_keys;
  bool has_store_request, store_request;
  bool has_replay_window;
  Interval replay_window;
  bool has_lease;
  int64 lease_us;
  bool has_max_payload;
  int64 max_payload_bytes;
  Oid store;
  bool store_misnamed;  // under Citus: this node's registry names another table for the store
  int grantee_count;
  Oid* grantees;  // in cache_context
  Size ignore_size;
  const void* ignore;  // the pointer set its fingerprint ignores (pointers.hpp), in cache_context; or nullptr
};

MemoryContext cache_context = nullptr;
HTAB* cache = nullptr;
Oid cached_config = InvalidOid;  // the registry tables the cache was filled from
Oid cached_grant = InvalidOid;
Oid cached_defaults_table = InvalidOid;
bool defaults_cached = false;
Defaults cached_defaults{};
// Bumped by every invalidation that may concern the registry: an entry read
// while it changed may predate a commit whose invalidation is already spent.
uint64 generation = 0;

void forget_policies(Datum, Oid relid) noexcept {
  if (relid != InvalidOid && relid != cached_config && relid != cached_grant && relid != cached_defaults_table)
    return;
  ++generation;
  defaults_cached = false;
  if (cache == nullptr) return;
  cache = nullptr;
  MemoryContextReset(cache_context);
}

// The cache, created empty when there is none or it is full.
HTAB* policy_cache(const Registry& r) {
  if (cache != nullptr && hash_get_num_entries(cache) < max_cached_namespaces) return cache;
  if (cache_context == nullptr)
    cache_context = AllocSetContextCreate(CacheMemoryContext, "idempotency namespace policies",
                                          ALLOCSET_SMALL_SIZES);
  cache = nullptr;
  MemoryContextReset(cache_context);
  HASHCTL ctl;
  std::memset(&ctl, 0, sizeof ctl);
  ctl.keysize = core::max_namespace_length + 1;
  ctl.entrysize = sizeof(Entry);
  ctl.hcxt = cache_context;
  cache = hash_create("idempotency namespace policies", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
  cached_config = r.config;
  cached_grant = r.grant;
  return cache;
}

// The namespace's row and grants, read as the store's owner with the latest
// snapshot: a change committed by another session after this transaction
// began is seen, so a cache refilled after its invalidation is never stale.
// Also the names the registry's writers gave the grantees and the store,
// which a node under Citus compares with what their OIDs name there (load).
Statement read_policy = {
    "SELECT c.replay_window, c.in_progress_lease, c.store_request, c.hash_keys, c.max_payload_bytes,"
    " ARRAY(SELECT g.grantee::pg_catalog.oid FROM idempotency.idem_namespace_grant g"
    "       WHERE g.namespace OPERATOR(pg_catalog.=) c.namespace ORDER BY g.grantee::pg_catalog.oid),"
    " c.store::pg_catalog.oid,"
    " ARRAY(SELECT g.grantee_name FROM idempotency.idem_namespace_grant g"
    "       WHERE g.namespace OPERATOR(pg_catalog.=) c.namespace ORDER BY g.grantee::pg_catalog.oid),"
    " c.store_name, c.fingerprint_ignore"
    " FROM idempotency.idem_namespace_config c WHERE c.namespace OPERATOR(pg_catalog.=) $1",
    1,
    {TEXTOID},
    nullptr,
    true};

// Whether name (a text datum, or NULL: not recorded) is what the role or
// the table of OID oid is called on this node.
bool role_named(Oid role, bool null, Datum name) {
  if (null) return true;
  const char* here = GetUserNameFromId(role, true);
  return here != nullptr && std::strcmp(here, TextDatumGetCString(name)) == 0;
}
bool table_named(Oid table, bool null, Datum name) {
  if (null || !OidIsValid(table)) return true;
  const char* relname = get_rel_name(table);
  if (relname == nullptr) return true;  // dropped: open_store says so
  const char* here = quote_qualified_identifier(get_namespace_name(get_rel_namespace(table)), relname);
  return std::strcmp(here, TextDatumGetCString(name)) == 0;
}

// An update of a namespace's registry row that changes nothing: under
// Citus it reaches every node's placement (idem_namespace_config_locked).
Statement touch_namespace = {
    "UPDATE idempotency.idem_namespace_config c SET configured_at = c.configured_at"
    " WHERE c.namespace OPERATOR(pg_catalog.=) $1",
    1,
    {TEXTOID},
    nullptr};

// An interval as a length of time in microseconds, counted as
// extract(epoch) counts it (idem_purge does): days of 24 hours, months of 30
// days, years of 365.25 days.
int64 length_us(const Interval* i) {
  return i->time + static_cast<int64>(i->day) * USECS_PER_DAY +
         static_cast<int64>(i->month / MONTHS_PER_YEAR) * SECS_PER_YEAR * USECS_PER_SEC +
         static_cast<int64>(i->month % MONTHS_PER_YEAR) * DAYS_PER_MONTH * USECS_PER_DAY;
}

// The defaults as a 0.9 schema had them: the server settings.
Defaults defaults_from_settings() {
  Defaults d{};
  d.replay_window.time = static_cast<int64>(replay_window_seconds) * USECS_PER_SEC;
  d.lease_us = static_cast<int64>(in_progress_lease_seconds) * USECS_PER_SEC;
  d.store_request = store_request_default;
  d.max_payload_bytes = max_payload_bytes;
  d.in_flight_wait_ms = in_flight_wait_ms;
  d.require_registered = require_registered_namespace;
  return d;
}

// The row of idem_defaults (1.0.0), read as the registry is (latest
// snapshot, as the extension's owner); the built-in defaults if someone
// deleted it.
Statement read_defaults = {
    "SELECT d.replay_window, d.in_progress_lease, d.store_request, d.max_payload_bytes, d.in_flight_wait,"
    " d.require_registered FROM idempotency.idem_defaults d",
    0,
    {},
    nullptr,
    true};

Defaults load_defaults() {
  Defaults d{};
  d.replay_window.time = USECS_PER_DAY;
  d.store_request = true;
  d.max_payload_bytes = 16 * 1024 * 1024;
  Datum row[6];
  bool nulls[6] = {true, true, true, true, true, true};
  if (execute(read_defaults, nullptr, "", row, nulls) == 0) return d;
  if (!nulls[0]) d.replay_window = *DatumGetIntervalP(row[0]);
  if (!nulls[1]) d.lease_us = length_us(DatumGetIntervalP(row[1]));
  if (!nulls[2]) d.store_request = DatumGetBool(row[2]);
  if (!nulls[3]) d.max_payload_bytes = DatumGetInt32(row[3]);
  if (!nulls[4]) d.in_flight_wait_ms = length_us(DatumGetIntervalP(row[4])) / 1000;
  if (!nulls[5]) d.require_registered = DatumGetBool(row[5]);
  return d;
}

// Fills e from the registry; e->name is set. The grantees are palloc'd in
// the current memory context.
void load(Entry* e, const text* ns, const Registry& r) {
  e->registered = false;
  e->hash_keys = false;
  e->has_store_request = e->has_replay_window = e->has_lease = e->has_max_payload = false;
  e->store = InvalidOid;
  e->store_misnamed = false;
  e->grantee_count = 0;
  e->grantees = nullptr;
  e->ignore_size = 0;
  e->ignore = nullptr;
  Datum row[10];
  bool nulls[10];
  const Datum values[1] = {PointerGetDatum(ns)};
  if (execute(read_policy, values, " ", row, nulls) == 0) return;
  e->registered = true;
  if (!nulls[0]) e->has_replay_window = true, e->replay_window = *DatumGetIntervalP(row[0]);
  if (!nulls[1]) {
    e->has_lease = true;
    e->lease_us = length_us(DatumGetIntervalP(row[1]));
  }
  if (!nulls[2]) e->has_store_request = true, e->store_request = DatumGetBool(row[2]);
  e->hash_keys = DatumGetBool(row[3]);
  if (!nulls[4]) e->has_max_payload = true, e->max_payload_bytes = DatumGetInt32(row[4]);
  if (!nulls[6]) e->store = DatumGetObjectId(row[6]);
  // Pointers written by hand that are not pointers fail every call, named.
  if (!nulls[9]) e->ignore = pointer_set(DatumGetArrayTypeP(row[9]), &e->ignore_size, ns);
  ArrayType* grantees = DatumGetArrayTypeP(row[5]);
  Datum* oids;
  int count;
  deconstruct_array(grantees, OIDOID, sizeof(Oid), true, TYPALIGN_INT, &oids, nullptr, &count);
  // Under Citus a node's copy of the registry may hold the coordinator's
  // OIDs (Citus copies existing rows, and the rows it places on a node
  // added later, in binary): there they may name other roles and tables.
  // A grant whose role has another name here counts for nothing, and a
  // store of another name is refused (authorize), until
  // idem_distribute_registry writes the rows again by name.
  const bool check_names = citus_installed() && citus_manages(r.config);
  Datum* names = nullptr;
  bool* name_nulls = nullptr;
  int name_count = 0;
  if (check_names && !nulls[7])
    deconstruct_array(DatumGetArrayTypeP(row[7]), TEXTOID, -1, false, TYPALIGN_INT, &names, &name_nulls,
                      &name_count);
  e->grantees = static_cast<Oid*>(palloc(sizeof(Oid) * (count > 0 ? count : 1)));
  for (int i = 0; i < count; ++i) {
    const Oid role = DatumGetObjectId(oids[i]);
    if (check_names && i < name_count && !role_named(role, name_nulls[i], names[i])) continue;
    e->grantees[e->grantee_count++] = role;
  }
  if (check_names) e->store_misnamed = !table_named(e->store, nulls[8], row[8]);
}

// Oid array copy in context cx.
Oid* copy_oids(MemoryContext cx, const Oid* oids, int count) {
  auto* out = static_cast<Oid*>(MemoryContextAlloc(cx, sizeof(Oid) * (count > 0 ? count : 1)));
  if (count > 0) std::memcpy(out, oids, sizeof(Oid) * count);
  return out;
}

// Pointer set copy in context cx (nullptr stays nullptr).
const void* copy_block(MemoryContext cx, const void* block, Size size) {
  if (block == nullptr) return nullptr;
  void* out = MemoryContextAlloc(cx, size);
  std::memcpy(out, block, size);
  return out;
}

// The entry for ns, from the cache or loaded into it, with its grantees
// copied into the current memory context: checking them reads catalogs,
// which may run the invalidation that clears the cache.
Entry lookup(const text* ns, const Registry& r) {
  char name[core::max_namespace_length + 1] = {};
  std::memcpy(name, VARDATA_ANY(ns), VARSIZE_ANY_EXHDR(ns));  // validated: at most 64 bytes
  if (auto* hit = static_cast<Entry*>(hash_search(policy_cache(r), name, HASH_FIND, nullptr))) {
    Entry e = *hit;
    e.grantees = copy_oids(CurrentMemoryContext, hit->grantees, hit->grantee_count);
    e.ignore = copy_block(CurrentMemoryContext, hit->ignore, hit->ignore_size);
    return e;
  }
  // Lock the registry first (which runs pending invalidations), then read
  // it with a newer snapshot: a change committed before the read is in it,
  // and one committed after sends an invalidation that comes later and
  // bumps generation. An entry read while generation moved is not cached.
  LockRelationOid(r.config, AccessShareLock);
  LockRelationOid(r.grant, AccessShareLock);
  const uint64 read_at = generation;
  Entry loaded;
  std::memcpy(loaded.name, name, sizeof name);
  load(&loaded, ns, r);
  if (generation != read_at) return loaded;
  // Entered only once complete (an error while loading, or copying into the
  // cache's context, leaves nothing).
  HTAB* into = policy_cache(r);
  Entry cached = loaded;
  cached.grantees = copy_oids(cache_context, loaded.grantees, loaded.grantee_count);
  cached.ignore = copy_block(cache_context, loaded.ignore, loaded.ignore_size);
  *static_cast<Entry*>(hash_search(into, name, HASH_ENTER, nullptr)) = cached;
  return loaded;
}

// Whether the current user may use a namespace with these grantees: the
// store's owner and its members (superusers among them) always may.
bool may_use(const Entry& e, Oid owner) {
  const Oid user = GetUserId();
  if (has_privs_of_role(user, owner)) return true;
  for (int i = 0; i < e.grantee_count; ++i)
    if (has_privs_of_role(user, e.grantees[i])) return true;
  return false;
}

// The lowercase hex SHA-256 of key's UTF-8 bytes, NUL-terminated.
void key_hex(const text* key, char (&hex)[65]) {
  const core::Slice utf8 = utf8_of(key);
  const core::Digest digest = core::Sha256::of(utf8.data, utf8.size);
  core::to_hex(digest.data(), digest.size(), hex);
}

}  // namespace

// Warns, once per backend, of a server setting set for a 0.9 schema that
// a 1.0 schema no longer reads: the operator meant it, and it is ignored.
void warn_of_old_setting() {
  static bool warned = false;
  const char* name = setting_no_longer_applying();
  if (warned || name == nullptr) return;
  warned = true;
  ereport(WARNING, (errcode(ERRCODE_WARNING_DEPRECATED_FEATURE),
                    errmsg("setting \"%s\" no longer applies", name),
                    errdetail("From idempotency 1.0.0 the defaults of namespaces come from idem_defaults; the "
                              "update to 1.0.0 copied the server's values there."),
                    errhint("See them with SELECT * FROM idempotency.idem_defaults, change them with "
                            "idem_namespace_defaults, and remove %s where it is set (postgresql.conf, ALTER "
                            "DATABASE or ALTER ROLE ... SET).",
                            name)));
}

Defaults namespace_defaults() {
  const Registry r = registry();
  if (!OidIsValid(r.defaults)) return defaults_from_settings();
  warn_of_old_setting();
  if (defaults_cached && cached_defaults_table == r.defaults) return cached_defaults;
  // As a namespace's entry is loaded (lookup): locked first, read with a
  // newer snapshot, cached only if no invalidation came meanwhile.
  LockRelationOid(r.defaults, AccessShareLock);
  const uint64 read_at = generation;
  const Defaults d = load_defaults();
  if (generation == read_at) {
    cached_defaults = d;
    cached_defaults_table = r.defaults;
    defaults_cached = true;
  }
  return d;
}

Policy authorize(const text* ns) {
  require_trusted_settings();
  // A grant revoked by a transaction that has committed holds for no later
  // call, even inside a transaction that already locked everything it uses.
  AcceptInvalidationMessages();
  const Registry r = registry();
  Policy p{};
  const Entry e = lookup(ns, r);
  if (!may_use(e, r.owner))
    throw core::Error(core::sqlstate::insufficient_privilege,
                      "permission denied for idempotency namespace \"" + string_of(ns) + "\"",
                      "The namespace's administrator grants it with idem_grant(namespace, role).");
  const Defaults d = namespace_defaults();
  if (!e.registered && d.require_registered)
    throw core::Error(core::sqlstate::undefined_object,
                      "idempotency namespace \"" + string_of(ns) + "\" is not registered",
                      OidIsValid(r.defaults)
                          ? "The defaults require registered namespaces (idem_namespace_defaults); register it with "
                            "idem_namespace_configure."
                          : "idempotency.require_registered_namespace is on; register it with "
                            "idem_namespace_configure.");
  p.store_request = d.store_request;
  p.replay_window = d.replay_window;
  p.lease_us = d.lease_us;
  p.max_payload_bytes = d.max_payload_bytes;
  p.in_flight_wait_ms = d.in_flight_wait_ms;
  p.registered = e.registered;
  p.hash_keys = e.hash_keys;
  if (e.has_store_request) p.store_request = e.store_request;
  if (e.has_replay_window) p.has_replay_window = true, p.replay_window = e.replay_window;
  if (e.has_lease) p.lease_us = e.lease_us;
  if (e.has_max_payload) p.max_payload_bytes = e.max_payload_bytes;
  p.store = e.store;
  p.ignore = e.ignore, p.ignore_size = e.ignore_size;
  if (e.store_misnamed)
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      "this node's idempotency registry names another table as the store of namespace \"" +
                          string_of(ns) + "\"",
                      "The store's OID names another table here than the one the namespace was bound to: Citus "
                      "copied the registry to this node by OID (a node added, or a rebalance), and OIDs differ "
                      "between nodes.",
                      "Run SELECT idempotency.idem_distribute_registry() on the coordinator: it writes every row "
                      "again by name.");
  return p;
}

text* stored_key(const text* key, const Policy& policy) {
  if (!policy.hash_keys) return const_cast<text*>(key);
  char hex[65];
  key_hex(key, hex);
  return cstring_to_text_with_len(hex, 64);
}

void key_label(const text* key, char (&out)[32]) {
  char hex[65];
  key_hex(key, hex);
  std::snprintf(out, sizeof out, "sha256:%.12s...", hex);
}

void require_read_write(const text* key, const char* function, const char* action) {
  if (!XactReadOnly) return;
  const bool standby = RecoveryInProgress();
  char label[32];
  key_label(key, label);
  throw core::Error(core::sqlstate::read_only_sql_transaction,
                    std::string("cannot ") + action + " idempotency key " + label + " in a read-only transaction",
                    standby ? "The server is a standby in recovery: it replays recorded outcomes but records no "
                              "new attempt."
                            : "The transaction is read-only (SET TRANSACTION READ ONLY, or "
                              "default_transaction_read_only): it replays recorded outcomes but records no new "
                              "attempt.",
                    std::string("Call ") + function + (standby ? " on the primary." : " in a read-write transaction."));
}

void check_payload_size(const Jsonb* payload, const char* what, const text* ns, const Policy& policy) {
  const int64 size = VARSIZE(payload) - VARHDRSZ;
  if (size <= policy.max_payload_bytes) return;
  throw core::Error(core::sqlstate::program_limit_exceeded, std::string("idempotency ") + what + " is too large",
                    "It is " + std::to_string(size) + " bytes as jsonb; namespace \"" + string_of(ns) +
                        "\" allows at most " + std::to_string(policy.max_payload_bytes) +
                        " (its max_payload_bytes, or the defaults').");
}

void policies_relation_changed(Oid relid) noexcept { forget_policies(0, relid); }

}  // namespace idem::pg

// The registry tables' statement trigger: tells every backend (this one at
// its next command, the others at commit) to forget the cached policies.
IDEM_FUNCTION(idem_namespace_changed) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    throw idem::core::Error(idem::core::sqlstate::object_not_in_prerequisite_state,
                            "idem_namespace_changed may only be called as a trigger");
  Relation changed = reinterpret_cast<TriggerData*>(fcinfo->context)->tg_relation;
  CacheInvalidateRelcache(changed);
  // Under Citus the trigger fires on a node's placement of the registry
  // (a reference table's shard): the caches watch the tables of the
  // registry's own names, so tell them too. Looked up by name, not through
  // registry(): the trigger also fires in the update scripts of releases
  // this library no longer serves.
  const Oid schema = get_namespace_oid("idempotency", true);
  for (const char* name : {"idem_namespace_config", "idem_namespace_grant"}) {
    const Oid relid = OidIsValid(schema) ? get_relname_relid(name, schema) : InvalidOid;
    if (OidIsValid(relid) && relid != RelationGetRelid(changed)) CacheInvalidateRelcacheByRelid(relid);
  }
  return PointerGetDatum(NULL);  // no tuple: a statement trigger
}

// For the registry functions that must see every record of a namespace
// (changing hash_keys or store_request, dropping it): the namespace lock in
// ExclusiveLock, held until the transaction ends. It waits for the
// transactions that began a key in this namespace, and keeps new ones out,
// without touching any other namespace. The statements that follow must
// then see every record, so only READ COMMITTED, where each takes a new
// snapshot, may call it.
static Datum lock_namespace_body(FunctionCallInfo fcinfo);
// 1.0.0's symbol (the namespace's lock tag keyed with the secret in
// idempotency_internal); 0.9's for a schema not yet updated.
IDEM_FUNCTION(idem_lock_namespace_1_0) { return lock_namespace_body(fcinfo); }
IDEM_FUNCTION(idem_lock_namespace) { return lock_namespace_body(fcinfo); }
static Datum lock_namespace_body(FunctionCallInfo fcinfo) {
  text* ns = idem::pg::namespace_arg(fcinfo, 0);
  if (IsolationUsesXactSnapshot())
    throw idem::core::Error(idem::core::sqlstate::invalid_transaction_state,
                            "changing hash_keys, store_request, the lease or the fingerprint of an idempotency "
                            "namespace, or dropping it, needs READ COMMITTED",
                            std::string("This transaction is ") +
                                (IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ") +
                                "; its snapshot could miss records committed since it began.");
  idem::pg::lock_namespace(ns, ExclusiveLock);
  // Under Citus the namespace's begins run on every node that holds a shard
  // of its store: an update of its registry row that changes nothing
  // reaches each node's placement, where idem_namespace_config_locked takes
  // the same lock there, until the distributed transaction ends.
  const idem::pg::Registry r = idem::pg::registry();
  if (idem::pg::citus_installed() && idem::pg::citus_manages(r.config)) {
    const Datum values[1] = {PointerGetDatum(ns)};
    (void)idem::pg::execute(idem::pg::touch_namespace, values, " ");
  }
  PG_RETURN_VOID();
}

// The registry's row trigger (BEFORE UPDATE OR DELETE): an update that
// leaves configured_at as it was (idem_lock_namespace's, above) takes the
// namespace lock in ExclusiveLock on this node. On a single server
// idem_lock_namespace holds it already; under Citus this runs on every
// node's placement of the registry. (Any other write takes nothing: a
// delete by hand must not wait for the namespace's begins.)
static Datum config_locked_body(FunctionCallInfo fcinfo);
IDEM_FUNCTION(idem_namespace_config_locked_1_0) { return config_locked_body(fcinfo); }
IDEM_FUNCTION(idem_namespace_config_locked) { return config_locked_body(fcinfo); }
static Datum config_locked_body(FunctionCallInfo fcinfo) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    throw idem::core::Error(idem::core::sqlstate::object_not_in_prerequisite_state,
                            "idem_namespace_config_locked may only be called as a trigger");
  auto* data = reinterpret_cast<TriggerData*>(fcinfo->context);
  const TupleDesc desc = RelationGetDescr(data->tg_relation);
  const AttrNumber ns_column = SPI_fnumber(desc, "namespace");
  const AttrNumber at_column = SPI_fnumber(desc, "configured_at");
  bool null = true;
  const Datum ns = heap_getattr(data->tg_trigtuple, ns_column, desc, &null);
  bool lock = false;
  if (TRIGGER_FIRED_BY_UPDATE(data->tg_event)) {
    bool old_null = true, new_null = true;
    const Datum old_at = heap_getattr(data->tg_trigtuple, at_column, desc, &old_null);
    const Datum new_at = heap_getattr(data->tg_newtuple, at_column, desc, &new_null);
    lock = !old_null && !new_null && DatumGetTimestampTz(old_at) == DatumGetTimestampTz(new_at);
  }
  if (lock && !null) idem::pg::lock_namespace(DatumGetTextPP(ns), ExclusiveLock);
  return PointerGetDatum(TRIGGER_FIRED_BY_DELETE(data->tg_event) ? data->tg_trigtuple : data->tg_newtuple);
}
