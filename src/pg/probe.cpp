// probe.cpp: the dirty-snapshot look at one key (see probe.hpp).
#include "probe.hpp"

#include <string>

extern "C" {
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/subtrans.h"
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
#include "compat.hpp"
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

// The transaction that wrote the version in slot (its raw xmin) into
// p.xmin, and whether the version is frozen. A slot that holds no heap
// tuple (a store on another table access method) gives none: its records
// are then never answered without the namespace's lock.
void read_writer(TupleTableSlot* slot, Probe& p) {
  p.xmin = InvalidTransactionId;
  p.frozen = false;
  if (!TTS_IS_BUFFERTUPLE(slot)) return;
  bool should_free;
  HeapTuple tuple = ExecFetchSlotHeapTuple(slot, false, &should_free);  // the slot's own, not a copy
  p.xmin = HeapTupleHeaderGetRawXmin(tuple->t_data);
  p.frozen = HeapTupleHeaderXminFrozen(tuple->t_data);
}

}  // namespace

Prober* open_prober(const Store& store, const text* ns) {
  auto* pr = static_cast<Prober*>(palloc(sizeof(Prober)));
  pr->context = CurrentMemoryContext;
  pr->table = table_open(store.table, NoLock);
  pr->index = index_open(store.pkey, NoLock);
  key_scan_keys(pr->index, ns, ns, pr->keys);  // the key's argument is set by each probe
  InitDirtySnapshot(pr->dirty);
  pr->scan = compat::index_beginscan(pr->table, pr->index, &pr->dirty, 2, 0);
  pr->slot = table_slot_create(pr->table, nullptr);
  return pr;
}

void close_prober(Prober* pr) {
  ExecDropSingleTupleTableSlot(pr->slot);
  index_endscan(pr->scan);
  index_close(pr->index, NoLock);
  table_close(pr->table, NoLock);
  pfree(pr);
}

Probe probe_in_place(Prober* pr, const text* key, const text* given_key, bool check_snapshot) {
  ScanKeyData (&keys)[2] = pr->keys;
  keys[1].sk_argument = PointerGetDatum(key);
  TupleTableSlot* slot = pr->slot;
  const SnapshotData& dirty = pr->dirty;
  // The index AM may keep what it allocates during a rescan or a fetch for
  // the rest of the scan (PostgreSQL 18's btree does): in the scan's own
  // context, not the caller's, which a batch resets after each key.
  MemoryContext caller = MemoryContextSwitchTo(pr->context);
  index_rescan(pr->scan, keys, 2, nullptr, 0);
  ExecClearTuple(slot);
  const bool found = index_getnext_slot(pr->scan, ForwardScanDirection, slot);
  MemoryContextSwitchTo(caller);

  Probe p{};
  p.found = Found::nothing;
  if (found) {
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
      read_writer(slot, p);
      p.own = TransactionIdIsValid(p.xmin) && !p.frozen && TransactionIdIsCurrentTransactionId(p.xmin);
      const text* status = DatumGetTextPP(slot->tts_values[col_status - 1]);
      p.status = VARDATA_ANY(status)[0];
      p.request_hash = slot->tts_values[col_request_hash - 1];
      p.request_null = slot->tts_isnull[col_request_payload - 1];
      if (!p.request_null) p.request_payload = slot->tts_values[col_request_payload - 1];
      p.attempt = slot->tts_isnull[col_attempt - 1] ? 1 : DatumGetInt32(slot->tts_values[col_attempt - 1]);
      p.result_null = slot->tts_isnull[col_result_payload - 1];
      p.error_null = slot->tts_isnull[col_error_payload - 1];
      if (!p.result_null) p.result_payload = slot->tts_values[col_result_payload - 1];
      if (!p.error_null) p.error_payload = slot->tts_values[col_error_payload - 1];
    }
  }
  // A record the transaction's snapshot cannot see (committed after it was
  // taken) is a serialization failure, not a replay: the rows it stands for
  // are invisible to this transaction too. SERIALIZABLE always reads through
  // the snapshot as well, for its predicate locks.
  const bool check = check_snapshot &&
                     ((p.found == Found::row && !p.own && IsolationUsesXactSnapshot()) || IsolationIsSerializable());
  if (check && !snapshot_sees(pr->table, pr->index, keys, &slot->tts_tid) && p.found == Found::row && !p.own)
    concurrent_change(given_key);
  return p;
}

Probe probe_key(const Store& store, const text* ns, const text* key, const text* given_key, bool check_snapshot) {
  Prober* pr = open_prober(store, ns);
  Probe p = probe_in_place(pr, key, given_key, check_snapshot);
  if (p.found == Found::row) {  // copied before the prober's slot goes
    p.request_hash = datumCopy(p.request_hash, false, -1);
    if (!p.request_null) p.request_payload = datumCopy(p.request_payload, false, -1);
    if (!p.result_null) p.result_payload = datumCopy(p.result_payload, false, -1);
    if (!p.error_null) p.error_payload = datumCopy(p.error_payload, false, -1);
  }
  close_prober(pr);
  return p;
}

bool answerable_unlocked(const Probe& p) {
  if (p.own) return true;
  if (!TransactionIdIsValid(p.xmin) || !ActiveSnapshotSet()) return false;
  if (!XidInMVCCSnapshot(p.xmin, GetActiveSnapshot())) return true;
  // A frozen version whose writer reads as running or later: freezing
  // kept its raw xmin, 2^31 or more transactions ago (it then reads as
  // later than any transaction begun yet: answerable), or it was written
  // frozen (COPY FREEZE) since the snapshot (it reads as earlier: not).
  return p.frozen && TransactionIdFollowsOrEquals(p.xmin, XidFromFullTransactionId(ReadNextFullTransactionId()));
}

bool final_unlocked(const Probe& p) {
  core::Look look{};
  look.found = p.found, look.status = p.status;
  return core::final_without_locks(look, p.found == Found::row && answerable_unlocked(p));
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
