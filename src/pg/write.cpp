// write.cpp: the direct backend (backend.hpp): a store's claim, finish and
// forget writes through heapam and the index access methods, for a table
// exactly as the install scripts make the extension's (see write.hpp). No
// C++ object with a destructor is alive in this file while PostgreSQL is
// called: every function here may raise.
#include "write.hpp"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include <string>

#include "../core/error.hpp"
#include "backend.hpp"
#include "compat.hpp"
#include "fence.hpp"
#include "purge.hpp"

namespace idem::pg {

namespace {

// The columns of a directly written store (store.cpp, direct_index).
constexpr int natts = col_recovery_state;

// Inserts the entry for the heap tuple at tid into index (whose one or two
// columns are values[0..]); unique checks as INSERT makes them.
void insert_entry(Relation index, Relation table, Datum* values, ItemPointer tid, bool unique, bool unchanged) {
  bool isnull[2] = {false, false};
  IndexInfo* info = BuildIndexInfo(index);
  (void)compat::index_insert(index, values, isnull, tid, table, unique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
                             unchanged, info);
}

// Both index entries for the table tuple tup.
void insert_entries(const Store& store, Relation table, const Datum* values, ItemPointer tid, bool unchanged) {
  Relation pkey = index_open(store.pkey, RowExclusiveLock);
  Relation expires = index_open(store.expires_index, RowExclusiveLock);
  Datum key_columns[2] = {values[col_namespace - 1], values[col_key_value - 1]};
  insert_entry(pkey, table, key_columns, tid, true, unchanged);
  Datum expires_column[2] = {values[col_expires_at - 1], 0};
  insert_entry(expires, table, expires_column, tid, false, unchanged);
  index_close(expires, NoLock);
  index_close(pkey, NoLock);
}

// Inserts the record whose columns are values/nulls into store's table and
// both its indexes: a claim's in_progress row, or a held claim's finished
// record.
void insert_record(const Store& store, Datum (&values)[natts], bool (&nulls)[natts]) {
  Relation table = table_open(store.table, RowExclusiveLock);
  HeapTuple tuple = heap_form_tuple(RelationGetDescr(table), values, nulls);
  heap_insert(table, tuple, GetCurrentCommandId(true), 0, nullptr);
  insert_entries(store, table, values, &tuple->t_self, false);
  table_close(table, NoLock);
}

// Reads the record for (ns, key) under snapshot into values/nulls (with its
// tid; values NULL: the tid only); false when there is none or it is not the
// in_progress record claim names. No proof (Claim::none) names only a record
// this transaction claimed (inserted, or took over): another transaction's
// claim, committed under a lease, is finished only with its fence. With
// kept, what makes a matching record one forgetting refuses: taken over
// (attempt > 1) or with a recovery point (kept->result is Forgot::kept).
bool read_claim(Relation table, const Store& store, Snapshot snapshot, text* ns, text* key, const Claim& claim,
                Datum* values, bool* nulls, ItemPointerData* tid, Forgot* kept = nullptr) {
  Relation pkey = index_open(store.pkey, AccessShareLock);
  ScanKeyData keys[2];
  key_scan_keys(pkey, ns, key, keys);
  IndexScanDesc scan = scan_key(table, pkey, snapshot, keys);
  TupleTableSlot* slot = table_slot_create(table, nullptr);
  bool matches = index_getnext_slot(scan, ForwardScanDirection, slot);
  if (matches) {
    slot_getallattrs(slot);
    const text* status = DatumGetTextPP(slot->tts_values[col_status - 1]);
    matches = VARSIZE_ANY_EXHDR(status) == 11 && memcmp(VARDATA_ANY(status), "in_progress", 11) == 0;
    if (matches && claim.kind == Claim::fence)
      matches = !slot->tts_isnull[col_fence - 1] && DatumGetInt64(slot->tts_values[col_fence - 1]) == claim.value;
    if (matches && claim.kind == Claim::none) {
      bool no_xmin;
      const Datum xmin = slot_getsysattr(slot, MinTransactionIdAttributeNumber, &no_xmin);
      matches = !no_xmin && TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin));
    }
  }
  if (matches && kept != nullptr) {
    const int32 attempt = DatumGetInt32(slot->tts_values[col_attempt - 1]);
    const bool point = !slot->tts_isnull[col_recovery_point - 1];
    if (attempt > 1 || point)
      *kept = Forgot{Forgot::kept, attempt,
                     point ? text_to_cstring(DatumGetTextPP(slot->tts_values[col_recovery_point - 1])) : nullptr};
  }
  if (matches && values != nullptr) {
    // The new version is formed from these after the buffer is released:
    // copy what is not passed by value.
    const TupleDesc desc = RelationGetDescr(table);
    for (int i = 0; i < desc->natts; ++i) {
      nulls[i] = slot->tts_isnull[i];
      const Form_pg_attribute att = TupleDescAttr(desc, i);
      values[i] = nulls[i] ? 0 : datumCopy(slot->tts_values[i], att->attbyval, att->attlen);
    }
  }
  if (matches) *tid = slot->tts_tid;
  ExecDropSingleTupleTableSlot(slot);
  index_endscan(scan);
  index_close(pkey, NoLock);
  return matches;
}

// What heap_update or heap_delete answered, for a transition: true when the
// record was changed, false to look at it again (READ COMMITTED: another
// transaction changed it and committed while we waited). Raises 40001 where
// UPDATE would.
bool changed(TM_Result result) {
  switch (result) {
    case TM_Ok:
      return true;
    case TM_Updated:
    case TM_Deleted:
      if (IsolationUsesXactSnapshot())
        throw core::Error(core::sqlstate::serialization_failure,
                          "could not serialize access due to concurrent update",
                          "Another transaction changed the idempotency record after this transaction's snapshot "
                          "was taken (REPEATABLE READ or SERIALIZABLE).",
                          "Retry the transaction.");
      return false;
    default:  // TM_SelfModified, TM_Invisible: impossible after CommandCounterIncrement
      throw core::Error(core::sqlstate::internal_error, "unexpected result updating an idempotency record",
                        "heap_update or heap_delete answered " + std::to_string(static_cast<int>(result)) + ".");
  }
}

// The transition loop shared by finish and forget: read the record, change
// it, and under READ COMMITTED read it again if a concurrent transaction
// changed it first. committing/payload are finish's; forgetting deletes,
// but not a record taken over or with a recovery point (*kept).
bool transition(const Store& store, text* ns, text* key, const Claim& claim, bool forgetting, bool committing,
                Jsonb* payload, Forgot* kept) {
  Relation table = table_open(store.table, RowExclusiveLock);
  // What UPDATE and DELETE check first: a table published for updates or
  // deletes needs a replica identity, or subscribers cannot apply them.
  CheckCmdReplicaIdentity(table, forgetting ? CMD_DELETE : CMD_UPDATE);
  Datum values[natts];
  bool nulls[natts];
  bool done = false;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    const Snapshot snapshot = push_snapshot();
    ItemPointerData tid;
    const bool found = read_claim(table, store, snapshot, ns, key, claim, forgetting ? nullptr : values, nulls, &tid,
                                  forgetting ? kept : nullptr);
    PopActiveSnapshot();
    if (!found || (forgetting && kept->result == Forgot::kept)) break;
    TM_FailureData failure;
    if (forgetting) {
      if (!changed(compat::heap_delete(table, &tid, GetCurrentCommandId(true), &failure)))
        continue;
    } else {
      const int payload_column = committing ? col_result_payload : col_error_payload;
      values[col_status - 1] = CStringGetTextDatum(committing ? "committed" : "failed");
      values[payload_column - 1] = PointerGetDatum(payload);
      nulls[payload_column - 1] = false;
      values[col_updated_at - 1] = TimestampTzGetDatum(GetCurrentTimestamp());
      HeapTuple tuple = heap_form_tuple(RelationGetDescr(table), values, nulls);
      LockTupleMode mode;
      if (!changed(compat::heap_update(table, &tid, tuple, GetCurrentCommandId(true), &failure, &mode))) continue;
      // A HOT update (the usual case: no indexed column changed and the
      // page had room) needs no index entries; otherwise both get one.
      if (!HeapTupleIsHeapOnly(tuple)) insert_entries(store, table, values, &tuple->t_self, true);
    }
    done = true;
    break;
  }
  table_close(table, NoLock);
  return done;
}

// The inserts, as the statements of sql_backend.cpp make them.
int64 insert_claim(const Store& store, text* ns, text* key, Datum request_hash, Jsonb* request, TimestampTz now,
                   Interval* window) {
  const int64 fence = draw_fence();
  Datum values[natts] = {};
  bool nulls[natts] = {};
  nulls[col_recovery_point - 1] = nulls[col_recovery_state - 1] = true;
  values[col_namespace - 1] = PointerGetDatum(ns);
  values[col_key_value - 1] = PointerGetDatum(key);
  values[col_status - 1] = CStringGetTextDatum("in_progress");
  values[col_request_hash - 1] = request_hash;
  values[col_request_payload - 1] = PointerGetDatum(request);
  nulls[col_request_payload - 1] = request == nullptr;
  nulls[col_result_payload - 1] = nulls[col_error_payload - 1] = true;
  values[col_created_at - 1] = values[col_updated_at - 1] = TimestampTzGetDatum(now);
  values[col_expires_at - 1] =
      DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(now), IntervalPGetDatum(window));
  values[col_attempt - 1] = Int32GetDatum(1);
  values[col_fence - 1] = Int64GetDatum(fence);
  insert_record(store, values, nulls);
  return fence;
}

}  // namespace

Snapshot push_snapshot() {
  CommandCounterIncrement();
  PushCopiedSnapshot(IsolationUsesXactSnapshot() ? GetTransactionSnapshot() : GetLatestSnapshot());
  UpdateActiveSnapshotCommandId();
  return GetActiveSnapshot();
}

// The finished record of a claim held by its lock alone.
static void insert_finished(const Store& store, text* ns, text* key, const HeldClaim& held, bool committing,
                     Jsonb* payload, bool keep_request) {
  Datum values[natts] = {};
  bool nulls[natts] = {};
  nulls[col_recovery_point - 1] = nulls[col_recovery_state - 1] = true;
  values[col_namespace - 1] = PointerGetDatum(ns);
  values[col_key_value - 1] = PointerGetDatum(key);
  values[col_status - 1] = CStringGetTextDatum(committing ? "committed" : "failed");
  values[col_request_hash - 1] = PointerGetDatum(held.request_hash);
  values[col_request_payload - 1] = PointerGetDatum(held.request);
  nulls[col_request_payload - 1] = held.request == nullptr || !keep_request;
  values[col_result_payload - 1] = values[col_error_payload - 1] = PointerGetDatum(payload);
  nulls[col_result_payload - 1] = !committing;
  nulls[col_error_payload - 1] = committing;
  values[col_created_at - 1] = TimestampTzGetDatum(held.claimed_at);
  values[col_updated_at - 1] = TimestampTzGetDatum(GetCurrentTimestamp());
  values[col_expires_at - 1] = TimestampTzGetDatum(held.expires_at);
  values[col_attempt - 1] = Int32GetDatum(1);
  values[col_fence - 1] = Int64GetDatum(held.fence);
  insert_record(store, values, nulls);
}

namespace {

bool finish_claim(const Store& store, text* ns, text* key, const Claim& claim, bool committing, Jsonb* payload) {
  return transition(store, ns, key, claim, false, committing, payload, nullptr);
}

Forgot forget_claim(const Store& store, text* ns, text* key, const Claim& claim) {
  Forgot kept{Forgot::nothing, 0, nullptr};
  return transition(store, ns, key, claim, true, false, nullptr, &kept) ? Forgot{Forgot::forgotten, 0, nullptr} : kept;
}

// A chunk without the executor, or through the statement when the
// expires_at index was replaced meanwhile (-1).
int64 purge_chunk(const Store& store, int32 batch, const Leases& leases) {
  const int64 purged = purge_direct(store, batch, leases);
  return purged >= 0 ? purged : sql_backend.purge(store, batch, leases);
}

}  // namespace

const Backend direct_backend = {insert_claim, insert_finished, finish_claim, forget_claim, purge_chunk};

bool claimed_here(const Store& store, text* ns, text* key, const Claim& claim) {
  Relation table = table_open(store.table, RowExclusiveLock);
  const Snapshot snapshot = push_snapshot();
  ItemPointerData tid;
  const bool found = read_claim(table, store, snapshot, ns, key, claim, nullptr, nullptr, &tid);
  PopActiveSnapshot();
  table_close(table, NoLock);
  return found;
}

}  // namespace idem::pg
