// compat.hpp: everything in the glue that differs between PostgreSQL
// majors, one section per concern, each the only PG_VERSION_NUM test for it.
//
// Call sites use idem::pg::compat:: (or the IDEM_ macros) and never test
// PG_VERSION_NUM themselves, so supporting a new major means reading this
// file, not the whole glue. The majors built and tested are listed in the
// README (make test PG=NN runs the suites against one).
//
// To add an entry:
//   1. Add a section below: a comment naming the major that changed and
//      what changed, then an inline function (or, only where a declaration
//      must be produced, a macro) with the oldest supported behaviour in the
//      #else branch. Name it after the PostgreSQL function it stands for.
//   2. Include here any header the newer branch needs, not at the call site.
//   3. Change each call site to call compat::NAME; nothing else moves.
//   4. Build against every major (make test PG=NN for each in the README).
#pragma once

#include "postgres.hpp"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/tableam.h"
#include "miscadmin.h"
#include "postmaster/autovacuum.h"
#include "replication/walsender.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
}

// IDEM_VERSION is the control file's default_version, passed by the Makefile.
#ifndef IDEM_VERSION
#error "IDEM_VERSION must be defined (the Makefile passes the control file's default_version)"
#endif

// ---- Module magic -----------------------------------------------------------
// 18 can record the library's name and version (PG_MODULE_MAGIC_EXT), shown
// by pg_get_loaded_modules(); before 18 there is only PG_MODULE_MAGIC.
// Use once, at file scope, inside extern "C".
#if PG_VERSION_NUM >= 180000
#define IDEM_PG_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "idempotency", .version = IDEM_VERSION)
#else
#define IDEM_PG_MODULE_MAGIC PG_MODULE_MAGIC
#endif

namespace idem::pg::compat {

// ---- Index scans ------------------------------------------------------------
// 18 added an IndexScanInstrumentation * (EXPLAIN ANALYZE's counters) before
// the key counts; we never instrument, so it is NULL. 19 added scan flags
// (ScanOptions) at the end; we ask for none.
inline IndexScanDesc index_beginscan(Relation heap, Relation index, Snapshot snapshot, int nkeys,
                                     int norderbys) {
#if PG_VERSION_NUM >= 190000
  return ::index_beginscan(heap, index, snapshot, nullptr, nkeys, norderbys, SO_NONE);
#elif PG_VERSION_NUM >= 180000
  return ::index_beginscan(heap, index, snapshot, nullptr, nkeys, norderbys);
#else
  return ::index_beginscan(heap, index, snapshot, nkeys, norderbys);
#endif
}

// ---- Table scans ------------------------------------------------------------
// 19 added scan flags (ScanOptions) to table_beginscan; we ask for none.
inline TableScanDesc table_beginscan(Relation rel, Snapshot snapshot, int nkeys, ScanKeyData* keys) {
#if PG_VERSION_NUM >= 190000
  return ::table_beginscan(rel, snapshot, nkeys, keys, SO_NONE);
#else
  return ::table_beginscan(rel, snapshot, nkeys, keys);
#endif
}

// ---- Shared memory requests -------------------------------------------------
// From 15, a preloaded library must ask for shared memory and named LWLocks
// inside shmem_request_hook, where MaxBackends is known; before 15 it asks
// directly from _PG_init. bytes is called then. Call from _PG_init while
// shared_preload_libraries is processed, once.
namespace detail {
inline Size (*shmem_bytes)() = nullptr;
inline const char* tranche = nullptr;
inline int tranche_locks = 0;
inline void request_now() {
  RequestAddinShmemSpace(shmem_bytes());
  if (tranche != nullptr) RequestNamedLWLockTranche(tranche, tranche_locks);
}
#if PG_VERSION_NUM >= 150000
inline shmem_request_hook_type previous_shmem_request = nullptr;
inline void shmem_request() {
  if (previous_shmem_request) previous_shmem_request();
  request_now();
}
#endif
}  // namespace detail

inline void request_shmem(Size (*bytes)(), const char* tranche, int locks) {
  detail::shmem_bytes = bytes;
  detail::tranche = tranche;
  detail::tranche_locks = locks;
#if PG_VERSION_NUM >= 150000
  detail::previous_shmem_request = shmem_request_hook;
  shmem_request_hook = detail::shmem_request;
#else
  detail::request_now();
#endif
}

// ---- Shared hash tables -------------------------------------------------------
// 19 gave ShmemInitHash one size (nelems) where it took an initial and a
// maximum one; ours are of fixed size, the two alike.
inline HTAB* shmem_init_hash(const char* name, long size, HASHCTL* info, int flags) {
#if PG_VERSION_NUM >= 190000
  return ::ShmemInitHash(name, size, info, flags);
#else
  return ::ShmemInitHash(name, size, size, info, flags);
#endif
}

// ---- Backends -----------------------------------------------------------------
// How many backends may run at once (their PGPROCs are numbered from 0):
// 15 computes MaxBackends before shmem_request_hook; before 15 _PG_init runs
// before it is computed, so it is the same sum of the settings (12 to 14).
inline int max_backends() {
#if PG_VERSION_NUM >= 150000
  return MaxBackends;
#else
  return MaxBackends > 0 ? MaxBackends
                         : MaxConnections + autovacuum_max_workers + 1 + max_worker_processes + max_wal_senders;
#endif
}

// This backend's number among the PGPROCs: 17 named it MyProcNumber;
// before, MyProc->pgprocno (-1 before the backend has a PGPROC).
inline int my_proc_number() {
#if PG_VERSION_NUM >= 170000
  return MyProcNumber;
#else
  return MyProc != nullptr ? MyProc->pgprocno : -1;
#endif
}

// ---- Custom GUC prefix ------------------------------------------------------
// 15 replaced EmitWarningsOnPlaceholders by MarkGUCPrefixReserved (which also
// refuses new placeholders under the prefix).
inline void reserve_guc_prefix(const char* prefix) {
#if PG_VERSION_NUM >= 150000
  MarkGUCPrefixReserved(prefix);
#else
  EmitWarningsOnPlaceholders(prefix);
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
// every major still marks, so that is what callers test. 19 added options
// (TABLE_UPDATE_*) after the command id; we pass none. Never a crosscheck
// snapshot; always waits for a concurrent updater.
inline TM_Result heap_update(Relation rel, ItemPointer tid, HeapTuple tuple, CommandId cid,
                             TM_FailureData* failure, LockTupleMode* mode) {
#if PG_VERSION_NUM >= 190000
  TU_UpdateIndexes update_indexes;
  return ::heap_update(rel, tid, tuple, cid, 0, InvalidSnapshot, true, failure, mode, &update_indexes);
#elif PG_VERSION_NUM >= 160000
  TU_UpdateIndexes update_indexes;
  return ::heap_update(rel, tid, tuple, cid, InvalidSnapshot, true, failure, mode, &update_indexes);
#else
  return ::heap_update(rel, tid, tuple, cid, InvalidSnapshot, true, failure, mode);
#endif
}

// ---- Heap delete ------------------------------------------------------------
// 19 replaced the changingPart flag at the end by options (TABLE_DELETE_*)
// after the command id; a store row never moves between partitions, so
// neither is set. Never a crosscheck snapshot; always waits.
inline TM_Result heap_delete(Relation rel, ItemPointer tid, CommandId cid, TM_FailureData* failure) {
#if PG_VERSION_NUM >= 190000
  return ::heap_delete(rel, tid, cid, 0, InvalidSnapshot, true, failure);
#else
  return ::heap_delete(rel, tid, cid, InvalidSnapshot, true, failure, false);
#endif
}

// ---- Table tuple delete -----------------------------------------------------
// 19 moved table_tuple_delete's changingPart flag to options
// (TABLE_DELETE_*) after the command id, as heap_delete's above; a store
// row never moves between partitions, so neither is set. No crosscheck
// snapshot; wait says whether to wait for a transaction that holds the row
// (the purge does not: TM_BeingModified instead).
inline TM_Result table_tuple_delete(Relation rel, ItemPointer tid, CommandId cid, Snapshot snapshot, bool wait,
                                    TM_FailureData* failure) {
#if PG_VERSION_NUM >= 190000
  return ::table_tuple_delete(rel, tid, cid, 0, snapshot, InvalidSnapshot, wait, failure);
#else
  return ::table_tuple_delete(rel, tid, cid, snapshot, InvalidSnapshot, wait, failure, false);
#endif
}

}  // namespace idem::pg::compat
