// record.cpp: table lookup, lock tags, per-key and namespace locks, and the
// dirty-snapshot probe.
#include "record.hpp"

#include <cstring>
#include <initializer_list>

extern "C" {
#include "access/genam.h"
#include "access/relation.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"
}

#include "../core/error.hpp"
#include "../core/hmac.hpp"
#include "compat.hpp"
#include "policy.hpp"

namespace idem::pg {

namespace {

// Mark our locks in pg_locks (objsubid) and keep them apart from
// pg_advisory_lock(bigint) (1) and pg_advisory_lock(int, int) (2).
constexpr uint16 key_lock_field4 = 0x4944;        // "ID"
constexpr uint16 namespace_lock_field4 = 0x494E;  // "IN"

constexpr int secret_size = 32;

struct Relations {
  Oid table = InvalidOid;
  Oid pkey = InvalidOid;
  Registry registry = {false, InvalidOid, InvalidOid, InvalidOid};
  Oid secret = InvalidOid;  // idem_lock_secret (0.5.0)
  bool fenced = false;
  Layout layout = {};
  bool layout_known = false;  // layout.expires_index and direct (writable_layout)
};
Relations cached;
// Bumped by every relcache invalidation, whatever relation it names: a
// lookup during which one arrived may mix two installations (a DROP and
// CREATE EXTENSION committed meanwhile, whose OIDs it cannot know yet) and is
// done again.
uint64 generation = 0;
// The HMAC keyed with the store's secret (NULL: a schema without one), and
// the secret it was keyed with. Per backend, like the SHA-256 context.
core::HmacSha256* keyed = nullptr;
uint8 keyed_with[secret_size];
// The last namespace's lock tag bits (most backends serve one namespace):
// valid while keyed is the HMAC they were computed with.
char last_namespace[64];
int last_namespace_len = -1;
uint64 last_namespace_bits;

void forget_relations(Datum, Oid relid) noexcept {
  ++generation;
  if (relid == InvalidOid || relid == cached.table || relid == cached.pkey || relid == cached.registry.config ||
      relid == cached.registry.grant || relid == cached.secret || relid == cached.layout.expires_index)
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
bool read_secret(Oid relid, uint8 (&out)[secret_size]) {
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
      found = VARSIZE_ANY_EXHDR(b) == secret_size;
      if (found) std::memcpy(out, VARDATA_ANY(b), secret_size);
    }
  }
  ExecDropSingleTupleTableSlot(slot);
  table_endscan(scan);
  UnregisterSnapshot(snapshot);
  relation_close(rel, AccessShareLock);
  return found;
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

// Each column as the install scripts create it: its type and NOT NULL.
struct Expected {
  Oid type;
  bool not_null;
};
constexpr Expected expected_columns[col_fence] = {
    {TEXTOID, true},         {TEXTOID, true},         {TEXTOID, true},         {BYTEAOID, true},
    {JSONBOID, false},       {JSONBOID, false},       {JSONBOID, false},       {TIMESTAMPTZOID, true},
    {TIMESTAMPTZOID, true},  {TIMESTAMPTZOID, true},  {INT4OID, true},         {INT8OID, false},
};

// The expires_at index when the store's rows may be written through heapam
// directly (write.cpp): a heap table of exactly the columns the install
// scripts create, no trigger, rule, row security or CHECK constraint, and no
// index but the primary key and the one on expires_at, both plain btrees.
// Anything an operator added (an index, a trigger, a constraint, a column,
// a changed type) makes it InvalidOid, and the writes go through SQL, which
// honours it.
Oid direct_index(Oid table, Oid pkey) {
  Relation rel = table_open(table, AccessShareLock);
  const TupleDesc desc = RelationGetDescr(rel);
  bool plain = rel->rd_rel->relam == HEAP_TABLE_AM_OID && rel->rd_rel->relkind == RELKIND_RELATION &&
               rel->trigdesc == nullptr && rel->rd_rules == nullptr && !rel->rd_rel->relrowsecurity &&
               !rel->rd_rel->relforcerowsecurity && desc->natts == col_fence &&
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
    plain = plain_btree(pkey, {col_namespace, col_key_value}, true) && OidIsValid(expires) &&
            plain_btree(expires, {col_expires_at}, false);
  }
  list_free(indexes);
  table_close(rel, AccessShareLock);
  return plain ? expires : InvalidOid;
}

// Whether Citus keeps relid in its metadata on this node (a distributed,
// reference or local-metadata table): then it keeps the rows in shard
// tables, and the relation of that name here is an empty shell.
bool citus_manages(Oid relid) {
  if (!OidIsValid(get_extension_oid("citus", true))) return false;
  const Oid partition = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
  const Oid by_relid = get_relname_relid("pg_dist_partition_logical_relid_index", PG_CATALOG_NAMESPACE);
  if (!OidIsValid(partition) || !OidIsValid(by_relid)) return false;
  Relation rel = table_open(partition, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
  SysScanDesc scan = systable_beginscan(rel, by_relid, true, nullptr, 1, &key);
  const bool managed = HeapTupleIsValid(systable_getnext(scan));
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
  return managed;
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
                      "Run ALTER EXTENSION idempotency UPDATE to install release 0.2.0 or later.");
  consistent = IndexGetRelation(r.pkey, true) == r.table;
  r.registry.config = get_relname_relid("idem_namespace_config", schema);
  r.registry.grant = get_relname_relid("idem_namespace_grant", schema);
  r.registry.installed = OidIsValid(r.registry.config) && OidIsValid(r.registry.grant);
  for (const Oid relid : {r.table, r.registry.config, r.registry.grant}) {
    if (!OidIsValid(relid) || !citus_manages(relid)) continue;
    const char* name = get_rel_name(relid);
    throw core::Error(core::sqlstate::feature_not_supported,
                      "the idempotency store cannot use a table that Citus manages",
                      std::string("Citus keeps the rows of idempotency.") + name +
                          " in shards (it is a distributed, reference or local-metadata table), and the table "
                          "of that name on this node is an empty shell: the store would answer from it, and "
                          "wrongly.",
                      "Keep the store's tables out of Citus; docs/scale-out.md says how to recover them.");
  }
  r.registry.owner = owner_of(r.table);
  r.secret = get_relname_relid("idem_lock_secret", schema);
  r.fenced = OidIsValid(r.secret) && get_attnum(r.table, "fence") == col_fence;
  r.layout.table = r.table;
  r.layout.pkey = r.pkey;
  return r;
}

// (Re)keys the HMAC when the schema's secret is not the one it holds.
void key_with_secret(const Relations& r) {
  uint8 secret[secret_size];
  if (!OidIsValid(r.secret) || !read_secret(r.secret, secret)) {
    delete keyed;
    keyed = nullptr;
    last_namespace_len = -1;
    return;
  }
  if (keyed != nullptr && std::memcmp(secret, keyed_with, secret_size) == 0) return;
  auto* fresh = new core::HmacSha256(secret, secret_size);
  delete keyed;
  keyed = fresh;
  last_namespace_len = -1;
  std::memcpy(keyed_with, secret, secret_size);
}

// The store's OIDs and lock key, looked up once per backend and again after
// any invalidation that concerns them. Returned by value: opening the table
// accepts invalidation messages, and forget_relations may clear the cache
// between the table_open and the index_open that follow.
Relations relations() {
  if (OidIsValid(cached.table)) return cached;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    const uint64 read_at = generation;
    bool consistent;
    const Relations r = look_up(consistent);
    key_with_secret(r);  // reads a table: may accept invalidations too
    if (consistent && generation == read_at) {
      cached = r;
      return r;
    }
  }
}

// Adds a text to the HMAC, after its length as 4 bytes big-endian.
void hmac_text(const text* t) {
  const uint32 len = VARSIZE_ANY_EXHDR(t);
  const uint8 be[4] = {static_cast<uint8>(len >> 24), static_cast<uint8>(len >> 16), static_cast<uint8>(len >> 8),
                       static_cast<uint8>(len)};
  keyed->update(be, sizeof be);
  keyed->update(VARDATA_ANY(t), len);
}

// 64 bits that name (kind, namespace[, key]) in a lock tag: keyed when the
// schema has a secret (the first 8 bytes, big-endian, of HMAC-SHA256 over
// kind and the length-prefixed texts), otherwise the unkeyed hash of 0.4.
uint64 tag_bits(char kind, const text* ns, const text* key) {
  (void)relations();  // loads the secret
  const int ns_len = VARSIZE_ANY_EXHDR(ns);
  const bool cacheable = kind == 'n' && keyed != nullptr && ns_len <= static_cast<int>(sizeof last_namespace);
  if (cacheable && ns_len == last_namespace_len && std::memcmp(last_namespace, VARDATA_ANY(ns), ns_len) == 0)
    return last_namespace_bits;
  if (keyed != nullptr) {
    keyed->reset();
    keyed->update(&kind, 1);
    hmac_text(ns);
    if (key != nullptr) hmac_text(key);
    const core::Digest d = keyed->finish();
    uint64 bits = 0;
    for (int i = 0; i < 8; ++i) bits = bits << 8 | d[i];
    if (cacheable) {
      std::memcpy(last_namespace, VARDATA_ANY(ns), ns_len);
      last_namespace_len = ns_len;
      last_namespace_bits = bits;
    }
    return bits;
  }
  uint64 h = hash_bytes_extended(reinterpret_cast<const unsigned char*>(VARDATA_ANY(ns)), VARSIZE_ANY_EXHDR(ns),
                                 kind == 'k' ? 0 : 1);
  if (key != nullptr)
    h = hash_bytes_extended(reinterpret_cast<const unsigned char*>(VARDATA_ANY(key)), VARSIZE_ANY_EXHDR(key), h);
  return h;
}

LOCKTAG tag_of(uint64 bits, uint16 field4) {
  LOCKTAG tag;
  SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(bits >> 32), static_cast<uint32>(bits), field4);
  return tag;
}

// Whether the transaction's snapshot sees the version at tid.
// Under SERIALIZABLE the scan also takes the predicate locks that make the
// read count for serializable snapshot isolation.
bool snapshot_sees(Relation table, Relation index, ScanKeyData (&keys)[2], const ItemPointerData* tid) {
  IndexScanDesc scan = scan_key(table, index, GetTransactionSnapshot(), keys);
  TupleTableSlot* slot = table_slot_create(table, nullptr);
  const bool seen = index_getnext_slot(scan, ForwardScanDirection, slot) &&
                    ItemPointerEquals(&slot->tts_tid, const_cast<ItemPointerData*>(tid));
  ExecDropSingleTupleTableSlot(slot);
  index_endscan(scan);
  return seen;
}

// The store's relations, with the table locked in table_mode and the
// primary key in AccessShareLock, as they are once the locks are held. OIDs
// read before could name a table or index that was replaced while a lock
// was awaited (REINDEX CONCURRENTLY, DROP and CREATE EXTENSION in one
// transaction): then the new ones are locked.
Relations locked_relations(LOCKMODE table_mode) {
  for (;;) {
    const Relations r = relations();
    LockRelationOid(r.table, table_mode);
    LockRelationOid(r.pkey, AccessShareLock);
    // The locks accepted any invalidation that came meanwhile: the cache now
    // says whether the table or its primary key was replaced before they
    // were granted (another index under the name, or another installation).
    const Relations now = relations();
    if (now.table == r.table && now.pkey == r.pkey &&
        SearchSysCacheExists1(RELOID, ObjectIdGetDatum(r.table)) &&
        SearchSysCacheExists1(RELOID, ObjectIdGetDatum(r.pkey)))
      return now;
    UnlockRelationOid(r.pkey, AccessShareLock);
    UnlockRelationOid(r.table, table_mode);
  }
}

}  // namespace

void register_record_invalidation() { CacheRegisterRelcacheCallback(forget_relations, 0); }

Registry registry() { return relations().registry; }

bool fenced_schema() { return relations().fenced; }

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

Layout writable_layout() {
  for (;;) {
    Relations r = locked_relations(RowExclusiveLock);
    if (r.layout_known) return r.layout;
    // Looked at under the lock, never before: the table's indexes, triggers
    // and constraints cannot change while it is held.
    const uint64 read_at = generation;
    if (r.fenced) r.layout.expires_index = direct_index(r.table, r.pkey);
    r.layout.direct = OidIsValid(r.layout.expires_index);
    if (generation != read_at) continue;
    cached.layout = r.layout;
    cached.layout_known = true;
    return r.layout;
  }
}

LOCKTAG lock_key(const text* ns, const text* key) {
  const LOCKTAG tag = tag_of(tag_bits('k', ns, key), key_lock_field4);
  (void)LockAcquire(&tag, ExclusiveLock, false, false);
  return tag;
}

void unlock_key(const LOCKTAG& tag) { LockRelease(&tag, ExclusiveLock, false); }

void lock_namespace(const text* ns, LOCKMODE mode) {
  const LOCKTAG tag = tag_of(tag_bits('n', ns, nullptr), namespace_lock_field4);
  (void)LockAcquire(&tag, mode, false, false);
}

Probe probe_key(const text* ns, const text* key, const text* given_key) {
  // RowExclusiveLock, as INSERT ... ON CONFLICT takes it, when the begin may
  // write: taking it only after the probe (a lock upgrade) could deadlock
  // with REINDEX or CREATE INDEX. A read-only transaction (a standby) may
  // take only AccessShareLock, and never writes.
  const Relations r = locked_relations(XactReadOnly ? AccessShareLock : RowExclusiveLock);
  Relation table = table_open(r.table, NoLock);
  Relation index = index_open(r.pkey, NoLock);

  SnapshotData dirty;
  InitDirtySnapshot(dirty);
  ScanKeyData keys[2];
  key_scan_keys(index, ns, key, keys);
  IndexScanDesc scan = scan_key(table, index, &dirty, keys);
  TupleTableSlot* slot = table_slot_create(table, nullptr);

  Probe p{};
  p.found = Found::nothing;
  if (index_getnext_slot(scan, ForwardScanDirection, slot)) {
    // The dirty snapshot reports an in-progress inserter in xmin and an
    // in-progress updater or deleter in xmax; both invalid means committed
    // (or ours).
    const TransactionId xid = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
    slot_getallattrs(slot);
    p.updated_at = DatumGetTimestampTz(slot->tts_values[col_updated_at - 1]);
    p.expires_at = DatumGetTimestampTz(slot->tts_values[col_expires_at - 1]);
    p.began_known = !TransactionIdIsValid(dirty.xmax) || TransactionIdIsValid(dirty.xmin);
    if (TransactionIdIsValid(xid)) {
      p.found = Found::busy;
      p.busy_xid = xid;
    } else {
      p.found = Found::row;
      bool no_xmin;
      const Datum xmin = slot_getsysattr(slot, MinTransactionIdAttributeNumber, &no_xmin);
      p.own = !no_xmin && TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin));
      const text* status = DatumGetTextPP(slot->tts_values[col_status - 1]);
      p.status = VARDATA_ANY(status)[0];
      p.request_hash = datumCopy(slot->tts_values[col_request_hash - 1], false, -1);
      p.request_null = slot->tts_isnull[col_request_payload - 1];
      if (!p.request_null) p.request_payload = datumCopy(slot->tts_values[col_request_payload - 1], false, -1);
      // A 0.3.0 table has no attempt column: every record is a first attempt.
      p.attempt = slot->tts_tupleDescriptor->natts >= col_attempt && !slot->tts_isnull[col_attempt - 1]
                      ? DatumGetInt32(slot->tts_values[col_attempt - 1])
                      : 1;
      p.result_null = slot->tts_isnull[col_result_payload - 1];
      p.error_null = slot->tts_isnull[col_error_payload - 1];
      if (!p.result_null) p.result_payload = datumCopy(slot->tts_values[col_result_payload - 1], false, -1);
      if (!p.error_null) p.error_payload = datumCopy(slot->tts_values[col_error_payload - 1], false, -1);
    }
  }
  const ItemPointerData tid = slot->tts_tid;
  ExecDropSingleTupleTableSlot(slot);
  index_endscan(scan);

  // A record the transaction's snapshot cannot see (committed after it was
  // taken) is a serialization failure, not a replay: the rows it stands for
  // are invisible to this transaction too. SERIALIZABLE always reads through
  // the snapshot as well, for its predicate locks.
  const bool check = (p.found == Found::row && !p.own && IsolationUsesXactSnapshot()) || IsolationIsSerializable();
  const bool unseen = check && !snapshot_sees(table, index, keys, &tid) && p.found == Found::row && !p.own;
  index_close(index, NoLock);
  table_close(table, NoLock);
  if (unseen) concurrent_change(given_key);
  return p;
}

void concurrent_change(const text* given_key) {
  char label[32];
  key_label(given_key, label);
  throw core::Error(core::sqlstate::serialization_failure,
                    std::string("could not serialize access to idempotency key ") + label +
                        " due to a concurrent change",
                    "Another transaction recorded or changed the key's record after this transaction's snapshot "
                    "was taken (REPEATABLE READ or SERIALIZABLE).",
                    "Retry the transaction.");
}

}  // namespace idem::pg
