// probe.cpp: the dirty-snapshot look at one key (see probe.hpp).
#include "probe.hpp"

#include <string>

extern "C" {
#include "access/relation.h"
#include "access/subtrans.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "storage/procarray.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include "../core/error.hpp"
#include "policy.hpp"

namespace idem::pg {

namespace {

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

}  // namespace

Probe probe_key(const Store& store, const text* ns, const text* key, const text* given_key, bool check_snapshot) {
  Relation table = table_open(store.table, NoLock);
  Relation index = index_open(store.pkey, NoLock);

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
  const bool check = check_snapshot &&
                     ((p.found == Found::row && !p.own && IsolationUsesXactSnapshot()) || IsolationIsSerializable());
  const bool unseen = check && !snapshot_sees(table, index, keys, &tid) && p.found == Found::row && !p.own;
  index_close(index, NoLock);
  table_close(table, NoLock);
  if (unseen) concurrent_change(given_key);
  return p;
}

TimestampTz takeover_from(const Probe& p, const Policy& policy) {
  return policy.lease_us > 0 ? p.updated_at + policy.lease_us : p.expires_at;
}

int backend_of(TransactionId xid) {
  // pg_subtrans keeps every xid from TransactionXmin on, and xid ran after
  // this transaction's snapshot was taken.
  if (TransactionIdIsNormal(xid) && TransactionIdFollowsOrEquals(xid, TransactionXmin))
    xid = SubTransGetTopmostTransaction(xid);
  return BackendXidGetPid(xid);
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
