// purge.cpp: one purge chunk through the table and index access methods
// (see purge.hpp). It does what store_admin.cpp's purge statement does, in
// the same order and under the same snapshot, but deletes each record
// directly (one WAL record per row instead of a row lock and then a
// delete) and finds them by the expires_at index alone (the statement
// joined its chunk back to the whole table by ctid). No C++ object with a
// destructor is alive in this file while PostgreSQL is called: every
// function here may raise.
#include "purge.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/genam.h"
#include "access/nbtree.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

#include <cstring>
#include <string>

#include "../core/error.hpp"
#include "compat.hpp"
#include "stats.hpp"
#include "write.hpp"

namespace idem::pg {

namespace {

// The namespaces' own leases, unpacked from their arrays on first use (most
// chunks meet no in_progress record).
struct LeaseTable {
  const Leases* given;
  bool unpacked;
  int count;
  Datum* namespaces;
  Datum* seconds;
  MemoryContext scratch;  // where a record's age is computed, reset after each
};

// The lease in seconds of namespace ns: its own, else the server's.
double lease_of(LeaseTable& t, const text* ns) {
  if (!t.unpacked) {
    t.unpacked = true;
    t.count = 0;
    if (t.given->namespaces != 0 && t.given->seconds != 0) {
      bool* nulls;
      int seconds_count;
      deconstruct_array(DatumGetArrayTypeP(t.given->namespaces), TEXTOID, -1, false, TYPALIGN_INT, &t.namespaces,
                        &nulls, &t.count);
      deconstruct_array(DatumGetArrayTypeP(t.given->seconds), FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL,
                        TYPALIGN_DOUBLE, &t.seconds, &nulls, &seconds_count);
      if (seconds_count < t.count) t.count = seconds_count;
    }
  }
  const Size length = VARSIZE_ANY_EXHDR(ns);
  for (int i = 0; i < t.count; ++i) {
    const text* name = DatumGetTextPP(t.namespaces[i]);
    if (VARSIZE_ANY_EXHDR(name) == length && std::memcmp(VARDATA_ANY(name), VARDATA_ANY(ns), length) == 0)
      return DatumGetFloat8(t.seconds[i]);
  }
  return t.given->server;
}

// Whether the record in slot may be purged at now (the transaction's start,
// the statement's now()): expired (checked only when expiry is asked for:
// the index scan's key has checked it), and not an in_progress record whose
// lease still runs. The age is date_part('epoch', now() - updated_at), as
// the statement computes it, so both paths draw the line at the same
// microsecond. Deforms only the status for most records: the payloads lie
// between it and the timestamps.
bool doomed(TupleTableSlot* slot, LeaseTable& leases, TimestampTz now, bool expiry) {
  if (expiry) {
    slot_getsomeattrs(slot, col_expires_at);
    if (DatumGetTimestampTz(slot->tts_values[col_expires_at - 1]) >= now) return false;
  }
  slot_getsomeattrs(slot, col_status);
  const text* status = DatumGetTextPP(slot->tts_values[col_status - 1]);
  if (VARSIZE_ANY_EXHDR(status) != 11 || std::memcmp(VARDATA_ANY(status), "in_progress", 11) != 0) return true;
  slot_getsomeattrs(slot, col_updated_at);
  const double lease = lease_of(leases, DatumGetTextPP(slot->tts_values[col_namespace - 1]));
  // The functions allocate (the interval, the field name and its lowered
  // copy): in a context of their own, or a chunk that passes a million
  // leased records would hold a hundred megabytes until it ends.
  MemoryContext old = MemoryContextSwitchTo(leases.scratch);
  const Datum age = DirectFunctionCall2(timestamp_mi, TimestampTzGetDatum(now), slot->tts_values[col_updated_at - 1]);
  const double seconds = DatumGetFloat8(DirectFunctionCall2(interval_part, CStringGetTextDatum("epoch"), age));
  MemoryContextSwitchTo(old);
  MemoryContextReset(leases.scratch);
  return seconds >= lease;
}

[[noreturn]] void unexpected(TM_Result result, const char* what) {
  throw core::Error(core::sqlstate::internal_error, "unexpected result purging an idempotency record",
                    std::string(what) + " answered " + std::to_string(static_cast<int>(result)) + ".");
}

// Deletes the record at tid, found under snapshot, unless another
// transaction holds it; true when deleted. The delete does not wait: a
// record being changed or locked by another transaction comes back as
// TM_BeingModified, and one changed by a transaction that committed after
// the snapshot as TM_Updated or TM_Deleted. Those (rare) records take the
// statement's own path, FOR UPDATE SKIP LOCKED: lock without waiting (which
// also takes a record this transaction itself locked), under READ
// COMMITTED following its updates to the newest version and checking that
// one again, as EvalPlanQual does, and under REPEATABLE READ and
// SERIALIZABLE raising 40001 for a record changed since the snapshot.
bool remove(Relation table, ItemPointer tid, Snapshot snapshot, CommandId cid, TupleTableSlot* locked,
            LeaseTable& leases, TimestampTz now) {
  TM_FailureData failure;
  TM_Result result = compat::table_tuple_delete(table, tid, cid, snapshot, false, &failure);
  switch (result) {
    case TM_Ok:
      return true;
    case TM_SelfModified:  // this command deleted it already
      return false;
    case TM_BeingModified:
    case TM_Updated:
    case TM_Deleted:
      break;
    default:  // TM_Invisible raises inside heap_delete; TM_WouldBlock is the lock's
      unexpected(result, "table_tuple_delete");
  }
  const bool xact_snapshot = IsolationUsesXactSnapshot();
  result = table_tuple_lock(table, tid, snapshot, locked, cid, LockTupleExclusive, LockWaitSkip,
                            xact_snapshot ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &failure);
  switch (result) {
    case TM_Ok:
      break;
    case TM_WouldBlock:    // another transaction holds it: skipped
    case TM_SelfModified:  // changed by this transaction since the snapshot
      return false;
    case TM_Updated:
    case TM_Deleted:
      if (xact_snapshot)
        throw core::Error(core::sqlstate::serialization_failure,
                          result == TM_Updated ? "could not serialize access due to concurrent update"
                                               : "could not serialize access due to concurrent delete",
                          "Another transaction changed an expired idempotency record after this transaction's "
                          "snapshot was taken (REPEATABLE READ or SERIALIZABLE).",
                          "Retry the transaction.");
      return false;  // deleted meanwhile
    default:
      unexpected(result, "table_tuple_lock");
  }
  // Locked. A newer version is purged only if it still qualifies; if not,
  // it stays locked until the transaction ends, as the statement's would.
  if (failure.traversed && !doomed(locked, leases, now, true)) return false;
  ItemPointerData latest = locked->tts_tid;
  result = compat::table_tuple_delete(table, &latest, cid, snapshot, true, &failure);
  if (result != TM_Ok) unexpected(result, "table_tuple_delete of a locked record");
  return true;
}

// Whether index is still the table's valid index on expires_at, now that
// it is locked: a REINDEX CONCURRENTLY may have replaced the one the store
// was opened with.
bool still_the_index(Oid index, Oid table) {
  HeapTuple tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(index));
  if (!HeapTupleIsValid(tuple)) return false;
  const auto* form = reinterpret_cast<Form_pg_index>(GETSTRUCT(tuple));
  const bool same = form->indrelid == table && form->indisvalid && form->indisready && form->indnatts == 1 &&
                    form->indkey.values[0] == col_expires_at;
  ReleaseSysCache(tuple);
  return same;
}

// Where this transaction's last chunk stopped in a store's expires_at
// index: the last entry it looked at, (expires_at, heap TID), which is the
// index's own order (btrees since PostgreSQL 12 break ties by heap TID).
// idem_purge runs its chunks in one transaction; without this each chunk
// would walk again over every entry the earlier ones deleted (still there,
// and visible to nobody but this transaction), so a purge of n records in
// chunks of b would visit n^2/2b of them. What an earlier chunk skipped (a
// record held or leased) is left for the next purge, as a held record
// always is. Forgotten when the (sub)transaction that set it ends (the
// callback on its CurTransactionContext: a chunk rolled back to a savepoint
// deleted nothing) and when a chunk reaches the end of the expired records.
struct Resume {
  Oid index;  // InvalidOid: none, start from the oldest
  TimestampTz value;
  ItemPointerData tid;
  MemoryContext context;  // the CurTransactionContext whose end forgets it
};
Resume resume{InvalidOid, 0, {}, nullptr};

void forget_resume(void*) noexcept {
  resume.index = InvalidOid;
  resume.context = nullptr;
}

// Notes the entry (value, tid) as where this transaction stopped in index.
void remember(Oid index, TimestampTz value, ItemPointerData tid) {
  if (resume.context != CurTransactionContext) {
    auto* callback = static_cast<MemoryContextCallback*>(
        MemoryContextAllocZero(CurTransactionContext, sizeof(MemoryContextCallback)));
    callback->func = forget_resume;
    MemoryContextRegisterResetCallback(CurTransactionContext, callback);
    resume.context = CurTransactionContext;
  }
  resume.index = index;
  resume.value = value;
  resume.tid = tid;
}

// One pass of a chunk: the entries the scan returns, skipping those up to
// and including after (when given: entries of the value the chunk resumes
// at, which come in heap TID order), deleting each record that qualifies
// until purged reaches batch. Returns false when the scan ran out.
struct Chunk {
  Relation table;
  Oid index;
  Snapshot snapshot;
  CommandId cid;
  TimestampTz now;
  int32 batch;
  TupleTableSlot* slot;
  TupleTableSlot* locked;
  LeaseTable* leases;
  int64 purged;
  bool resumable;  // the index orders ties by heap TID
};

bool sweep(Chunk& c, IndexScanDesc scan, const ItemPointerData* after) {
  while (c.purged < c.batch) {
    CHECK_FOR_INTERRUPTS();
    if (!scan->xs_heap_continue) {
      const ItemPointer entry = index_getnext_tid(scan, ForwardScanDirection);
      if (entry == nullptr) return false;
      if (after != nullptr) {
        if (ItemPointerCompare(entry, const_cast<ItemPointer>(after)) <= 0) continue;
        after = nullptr;
      }
    }
    if (!index_fetch_heap(scan, c.slot)) continue;
    if (c.resumable) {
      slot_getsomeattrs(c.slot, col_expires_at);
      remember(c.index, DatumGetTimestampTz(c.slot->tts_values[col_expires_at - 1]), scan->xs_heaptid);
    }
    if (!doomed(c.slot, *c.leases, c.now, false)) continue;
    ItemPointerData tid = c.slot->tts_tid;
    if (!remove(c.table, &tid, c.snapshot, c.cid, c.locked, *c.leases, c.now)) continue;
    ++c.purged;
    // doomed deformed the status, and so the namespace before it.
    count_in(DatumGetTextPP(c.slot->tts_values[col_namespace - 1]), ns_purged_rows);
  }
  return true;
}

// An index scan of index under snapshot with keys on expires_at.
IndexScanDesc scan_expires(Relation table, Relation index, Snapshot snapshot, ScanKeyData* keys, int nkeys) {
  IndexScanDesc scan = compat::index_beginscan(table, index, snapshot, nkeys, 0);
  index_rescan(scan, keys, nkeys, nullptr, 0);
  return scan;
}

// A scan key on the index's expires_at column: its operator of that
// strategy, from the index's own operator family.
void expires_key(ScanKeyData& key, Relation index, StrategyNumber strategy, TimestampTz value) {
  const Oid type = index->rd_opcintype[0];
  const Oid op = get_opfamily_member(index->rd_opfamily[0], type, type, strategy);
  if (!OidIsValid(op))
    throw core::Error(core::sqlstate::internal_error, "the expires_at index has no operator for a purge",
                      "Its operator family lacks btree strategy " + std::to_string(strategy) + ".");
  ScanKeyEntryInitialize(&key, 0, 1, strategy, InvalidOid, index->rd_indcollation[0], get_opcode(op),
                         TimestampTzGetDatum(value));
}

}  // namespace

int64 purge_direct(const Store& store, int32 batch, const Leases& given) {
  // The executor's refusal of a DELETE in a read-only transaction (a
  // standby's included), which the statement met before anything else.
  if (XactReadOnly)
    throw core::Error(core::sqlstate::read_only_sql_transaction, "cannot execute DELETE in a read-only transaction",
                      RecoveryInProgress() ? "The server is a standby in recovery: purging is a write."
                                           : "The transaction is read-only (SET TRANSACTION READ ONLY, or "
                                             "default_transaction_read_only): purging is a write.",
                      RecoveryInProgress() ? "Purge on the primary." : "Purge in a read-write transaction.");
  LockRelationOid(store.expires_index, AccessShareLock);
  if (!still_the_index(store.expires_index, store.table)) {
    UnlockRelationOid(store.expires_index, AccessShareLock);
    return -1;
  }
  Relation table = table_open(store.table, RowExclusiveLock);
  // What DELETE checks first: a table published for deletes needs a
  // replica identity, or subscribers cannot apply them.
  CheckCmdReplicaIdentity(table, CMD_DELETE);
  Relation index = index_open(store.expires_index, NoLock);
  LeaseTable leases{&given, false, 0, nullptr, nullptr,
                    AllocSetContextCreate(CurrentMemoryContext, "idempotency purge", ALLOCSET_SMALL_SIZES)};
  bool heapkeyspace, allequalimage;
  _bt_metaversion(index, &heapkeyspace, &allequalimage);
  Chunk c{table, store.expires_index, nullptr, 0, GetCurrentTransactionStartTimestamp(), batch, nullptr, nullptr,
          &leases, 0, heapkeyspace};
  c.snapshot = push_snapshot();
  c.cid = GetCurrentCommandId(true);
  c.slot = table_slot_create(table, nullptr);
  c.locked = table_slot_create(table, nullptr);
  const bool resuming = heapkeyspace && resume.index == store.expires_index;
  const Resume from = resume;
  bool more = true;
  ScanKeyData keys[2];
  if (resuming) {  // the rest of the value it stopped at, then the values after it
    expires_key(keys[0], index, BTEqualStrategyNumber, from.value);
    IndexScanDesc scan = scan_expires(table, index, c.snapshot, keys, 1);
    more = sweep(c, scan, &from.tid);
    index_endscan(scan);
    if (c.purged < batch) {
      expires_key(keys[0], index, BTGreaterStrategyNumber, from.value);
      expires_key(keys[1], index, BTLessStrategyNumber, c.now);
      scan = scan_expires(table, index, c.snapshot, keys, 2);
      more = sweep(c, scan, nullptr);
      index_endscan(scan);
    }
  } else {
    expires_key(keys[0], index, BTLessStrategyNumber, c.now);
    IndexScanDesc scan = scan_expires(table, index, c.snapshot, keys, 1);
    more = sweep(c, scan, nullptr);
    index_endscan(scan);
  }
  // At the end of the expired records the next chunk starts from the
  // oldest again (what was held may have been let go).
  if (!more) forget_resume(nullptr);
  MemoryContextDelete(leases.scratch);
  ExecDropSingleTupleTableSlot(c.locked);
  ExecDropSingleTupleTableSlot(c.slot);
  PopActiveSnapshot();
  index_close(index, NoLock);
  table_close(table, NoLock);
  return c.purged;
}

}  // namespace idem::pg
