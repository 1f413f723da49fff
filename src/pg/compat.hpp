// compat.hpp: everything in the glue that differs between PostgreSQL
// majors, one section per concern, each the only PG_VERSION_NUM test for it.
//
// Call sites use idem::pg::compat:: and never test PG_VERSION_NUM
// themselves, so supporting a new major means reading this file, not the
// whole glue. Each section names the major that changed and what changed;
// the #else branch is the oldest supported behaviour.
#pragma once

#include "postgres.hpp"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
}

namespace idem::pg::compat {

// ---- Index scans ------------------------------------------------------------
// 18 added an IndexScanInstrumentation * (EXPLAIN ANALYZE's counters) before
// the key counts; we never instrument, so it is NULL.
inline IndexScanDesc index_beginscan(Relation heap, Relation index, Snapshot snapshot, int nkeys,
                                     int norderbys) {
#if PG_VERSION_NUM >= 180000
  return ::index_beginscan(heap, index, snapshot, nullptr, nkeys, norderbys);
#else
  return ::index_beginscan(heap, index, snapshot, nkeys, norderbys);
#endif
}

// ---- Index insertion --------------------------------------------------------
// 14 added indexUnchanged (an update that changed no indexed column: a hint
// for btree's bottom-up deletion); 13 has no such hint.
inline bool index_insert(Relation index, Datum* values, bool* isnull, ItemPointer tid, Relation heap,
                         IndexUniqueCheck check, bool unchanged, IndexInfo* info) {
#if PG_VERSION_NUM >= 140000
  return ::index_insert(index, values, isnull, tid, heap, check, unchanged, info);
#else
  (void)unchanged;
  return ::index_insert(index, values, isnull, tid, heap, check, info);
#endif
}

// ---- Heap update ------------------------------------------------------------
// 16 made heap_update say which indexes need entries (TU_UpdateIndexes);
// before, the caller tells by whether the new version is heap-only, which
// every major still marks, so that is what callers test. Never a crosscheck
// snapshot; always waits for a concurrent updater.
inline TM_Result heap_update(Relation rel, ItemPointer tid, HeapTuple tuple, CommandId cid,
                             TM_FailureData* failure, LockTupleMode* mode) {
#if PG_VERSION_NUM >= 160000
  TU_UpdateIndexes update_indexes;
  return ::heap_update(rel, tid, tuple, cid, InvalidSnapshot, true, failure, mode, &update_indexes);
#else
  return ::heap_update(rel, tid, tuple, cid, InvalidSnapshot, true, failure, mode);
#endif
}

}  // namespace idem::pg::compat
