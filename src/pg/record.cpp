// record.cpp: table lookup, per-key lock and dirty-snapshot probe.
#include "record.hpp"

#include <cstring>

extern "C" {
#include "access/genam.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "catalog/pg_class.h"
}

#include "../core/error.hpp"
#include "compat.hpp"

namespace idem::pg {

namespace {

// Marks our locks in pg_locks (objsubid) and keeps them apart from
// pg_advisory_lock(bigint) (1) and pg_advisory_lock(int, int) (2).
constexpr uint16 lock_field4 = 0x4944;  // "ID"

// Column numbers of idempotency_record, as the install script creates it.
enum Column : AttrNumber {
  col_namespace = 1,
  col_key_value,
  col_status,
  col_request_hash,
  col_request_payload,
  col_result_payload,
  col_error_payload,
  col_created_at,
  col_updated_at,
  col_expires_at,
  col_attempt,  // 0.4.0
};

struct Relations {
  Oid table = InvalidOid;
  Oid pkey = InvalidOid;
  Registry registry = {false, InvalidOid, InvalidOid, InvalidOid};
};
Relations cached;

void forget_relations(Datum, Oid relid) noexcept {
  if (relid == InvalidOid || relid == cached.table || relid == cached.pkey || relid == cached.registry.config ||
      relid == cached.registry.grant)
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

// The table's and its primary key's OIDs, looked up once per backend.
// Returned by value: opening the table accepts invalidation messages, and
// forget_relations may clear the cache between the table_open and the
// index_open that follow.
Relations relations() {
  if (OidIsValid(cached.table)) return cached;
  const Oid schema = get_namespace_oid("idempotency", true);
  Relations r;
  if (OidIsValid(schema)) {
    r.table = get_relname_relid("idempotency_record", schema);
    r.pkey = get_relname_relid("idempotency_record_pkey", schema);
  }
  if (!OidIsValid(r.table) || !OidIsValid(r.pkey))
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state, "the idempotency store is not installed",
                      "Run ALTER EXTENSION idempotency UPDATE to install release 0.2.0 or later.");
  r.registry.config = get_relname_relid("idem_namespace_config", schema);
  r.registry.grant = get_relname_relid("idem_namespace_grant", schema);
  r.registry.installed = OidIsValid(r.registry.config) && OidIsValid(r.registry.grant);
  r.registry.owner = owner_of(r.table);
  cached = r;
  return cached;
}

LOCKTAG key_tag(const text* ns, const text* key) {
  uint64 h = hash_bytes_extended(reinterpret_cast<const unsigned char*>(VARDATA_ANY(ns)),
                                 VARSIZE_ANY_EXHDR(ns), 0);
  h = hash_bytes_extended(reinterpret_cast<const unsigned char*>(VARDATA_ANY(key)), VARSIZE_ANY_EXHDR(key), h);
  LOCKTAG tag;
  SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(h >> 32), static_cast<uint32>(h), lock_field4);
  return tag;
}

}  // namespace

void register_record_invalidation() { CacheRegisterRelcacheCallback(forget_relations, 0); }

Registry registry() { return relations().registry; }

LOCKTAG lock_key(const text* ns, const text* key) {
  const LOCKTAG tag = key_tag(ns, key);
  (void)LockAcquire(&tag, ExclusiveLock, false, false);
  return tag;
}

void unlock_key(const LOCKTAG& tag) { LockRelease(&tag, ExclusiveLock, false); }

Probe probe_key(const text* ns, const text* key) {
  const Relations r = relations();
  Relation table = table_open(r.table, AccessShareLock);
  Relation index = index_open(r.pkey, AccessShareLock);

  SnapshotData dirty;
  InitDirtySnapshot(dirty);
  ScanKeyData keys[2];
  ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(ns));
  ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_TEXTEQ, PointerGetDatum(key));
  IndexScanDesc scan = compat::index_beginscan(table, index, &dirty, 2, 0);
  index_rescan(scan, keys, 2, nullptr, 0);
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

  ExecDropSingleTupleTableSlot(slot);
  index_endscan(scan);
  index_close(index, NoLock);
  table_close(table, NoLock);
  return p;
}

}  // namespace idem::pg
