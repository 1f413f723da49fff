// namespace_stats.cpp: the counters of each namespace and the claims in
// flight of each backend, in shared memory when the library is in
// shared_preload_libraries (as the server's counters of stats.cpp), and
// idem_namespace_counters, which reads them for the current database.
//
// A namespace's counters are a row of a shared hash table keyed by
// (database, namespace), bounded by idempotency.tracked_namespaces: a
// namespace first counted once the table holds that many is counted under
// the database's row "_other" (as is a namespace named "_other"). Rows are
// made on first count and forgotten by idem_stats_reset, which bumps a
// generation number. Each backend remembers the rows it counted in (the
// last one, then a hash table), checked against that number, so a count is
// a string comparison, an atomic read and an atomic add: the shared table's
// lock is taken only the first time a backend counts in a namespace.
//
// A backend's transaction shows its fresh claims (up to four namespaces,
// how many and since when) in its own entry of an array indexed by its
// PGPROC number, until it ends: what retries of those keys see in flight,
// which no row shows until the transaction commits. The entry is written
// by its backend alone, under a change count that readers check (as
// PgBackendStatus's st_changecount).
#include "stats.hpp"

#include <algorithm>
#include <cstring>

extern "C" {
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

#include "../core/error.hpp"
#include "../core/namespace.hpp"
#include "compat.hpp"
#include "guard.hpp"

namespace idem::pg {

int tracked_namespaces = 1000;

namespace {

// "_other" rows beyond tracked_namespaces: one per database whose
// namespaces overflow; past that many databases, their counts are dropped.
constexpr int overflow_rows = 64;
// The namespaces of one transaction whose claims its backend shows.
constexpr int claims_per_backend = 4;
constexpr char overflow_name[] = "_other";
constexpr Size overflow_length = sizeof overflow_name - 1;
// More distinct namespaces than this in one backend clear its cache.
constexpr long max_cached_slots = 1024;

struct Key {
  Oid database;
  char name[core::max_namespace_length + 1];  // NUL-padded
};

struct Slot {
  Key key;  // first: dynahash keys lead the entry
  pg_atomic_uint64 values[ns_counter_count];
};

// One backend's transaction's fresh claims, by namespace.
struct OpenClaims {
  pg_atomic_uint32 change;  // odd while the backend writes the rest
  uint32 used;
  uint64 generation;  // of the slots named below
  struct {
    Slot* slot;
    TimestampTz since;  // when the statement that made the first claim started
    int64 claims;
  } of[claims_per_backend];
};

struct Header {
  LWLock* lock;  // guards the table's rows (not their counters) and the counts below
  pg_atomic_uint64 generation;
  int capacity;  // tracked_namespaces when the server started
  int tracked;   // rows of namespaces, not "_other"
  int rows;
  int backends;
};

Header* header = nullptr;  // nullptr: the counters are off
OpenClaims* open_claims = nullptr;
HTAB* table = nullptr;

// This backend's cache: the row counted in last, then the others.
struct Cached {
  char name[core::max_namespace_length + 1];  // hash key, NUL-padded
  Slot* slot;                                  // nullptr: the table had no room
};
struct Last {
  Size length;
  char name[core::max_namespace_length + 1];
  Slot* slot;
  uint64 generation;
};
Last last{0, {}, nullptr, 0};
HTAB* cache = nullptr;
uint64 cache_generation = 0;
MemoryContext cache_context = nullptr;

Size open_claims_bytes(int backends) { return MAXALIGN(sizeof(OpenClaims) * static_cast<Size>(backends)); }

// The row of name (length bytes, at most 64) in the current database, found
// or made: "_other"'s when the table holds tracked_namespaces namespaces;
// nullptr when not even that row can be made.
Slot* resolve(const char* name, Size length) {
  Key key;
  std::memset(&key, 0, sizeof key);
  key.database = MyDatabaseId;
  std::memcpy(key.name, name, length);
  LWLockAcquire(header->lock, LW_SHARED);
  auto* slot = static_cast<Slot*>(hash_search(table, &key, HASH_FIND, nullptr));
  LWLockRelease(header->lock);
  if (slot != nullptr) return slot;
  LWLockAcquire(header->lock, LW_EXCLUSIVE);
  slot = static_cast<Slot*>(hash_search(table, &key, HASH_FIND, nullptr));
  if (slot == nullptr) {
    const bool overflow = (length == overflow_length && std::memcmp(name, overflow_name, length) == 0) ||
                          header->tracked >= header->capacity;
    if (overflow) {
      std::memset(key.name, 0, sizeof key.name);
      std::memcpy(key.name, overflow_name, overflow_length);
      slot = static_cast<Slot*>(hash_search(table, &key, HASH_FIND, nullptr));
    }
    const bool room = overflow ? header->rows - header->tracked < overflow_rows : true;
    if (slot == nullptr && room) {
      bool found = false;
      slot = static_cast<Slot*>(hash_search(table, &key, HASH_ENTER_NULL, &found));
      if (slot != nullptr && !found) {
        for (pg_atomic_uint64& v : slot->values) pg_atomic_init_u64(&v, 0);
        ++header->rows;
        if (!overflow) ++header->tracked;
      }
    }
  }
  LWLockRelease(header->lock);
  return slot;
}

// The row of name through this backend's cache (made again after a reset).
Slot* slot_from_cache(const char* name, Size length, uint64 generation) {
  if (cache == nullptr || cache_generation != generation || hash_get_num_entries(cache) >= max_cached_slots) {
    if (cache_context == nullptr)
      cache_context = AllocSetContextCreate(TopMemoryContext, "idempotency namespace counters", ALLOCSET_SMALL_SIZES);
    cache = nullptr;
    MemoryContextReset(cache_context);
    HASHCTL ctl;
    std::memset(&ctl, 0, sizeof ctl);
    ctl.keysize = core::max_namespace_length + 1;
    ctl.entrysize = sizeof(Cached);
    ctl.hcxt = cache_context;
    cache = hash_create("idempotency namespace counters", 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
    cache_generation = generation;
  }
  char padded[core::max_namespace_length + 1] = {};
  std::memcpy(padded, name, length);
  if (auto* hit = static_cast<Cached*>(hash_search(cache, padded, HASH_FIND, nullptr))) return hit->slot;
  Slot* slot = resolve(name, length);
  auto* entry = static_cast<Cached*>(hash_search(cache, padded, HASH_ENTER, nullptr));
  entry->slot = slot;
  return slot;
}

// The row of namespace ns, or nullptr; the counters are on. A name longer
// than a namespace's (a store's row written by hand) counts as "_other".
Slot* slot_of(const text* ns, uint64 generation) {
  const Size length = VARSIZE_ANY_EXHDR(ns);
  const char* name = VARDATA_ANY(ns);
  if (last.generation == generation && last.length == length && std::memcmp(last.name, name, length) == 0)
    return last.slot;
  if (length > core::max_namespace_length) return slot_from_cache(overflow_name, overflow_length, generation);
  Slot* slot = slot_from_cache(name, length, generation);
  last.length = length;
  std::memcpy(last.name, name, length);
  last.slot = slot;
  last.generation = generation;
  return slot;
}

// This backend's entry of the claims in flight, or nullptr.
OpenClaims* my_open_claims() {
  const int me = compat::my_proc_number();
  return me >= 0 && me < header->backends ? &open_claims[me] : nullptr;
}

// Marks the start and the end of a change to the backend's own entry.
void change_begins(OpenClaims& o) {
  pg_atomic_write_u32(&o.change, pg_atomic_read_u32(&o.change) + 1);
  pg_write_barrier();
}
void change_ends(OpenClaims& o) {
  pg_write_barrier();
  pg_atomic_write_u32(&o.change, pg_atomic_read_u32(&o.change) + 1);
}

// Shows a fresh claim of slot's namespace by this backend's transaction.
void note_claim(Slot* slot, uint64 generation) {
  OpenClaims* o = my_open_claims();
  if (o == nullptr) return;
  change_begins(*o);
  if (o->generation != generation) o->used = 0, o->generation = generation;
  uint32 i = 0;
  while (i < o->used && o->of[i].slot != slot) ++i;
  if (i < o->used) {
    ++o->of[i].claims;
  } else if (o->used < claims_per_backend) {
    o->of[i].slot = slot;
    o->of[i].since = GetCurrentStatementStartTimestamp();
    o->of[i].claims = 1;
    ++o->used;
  }
  change_ends(*o);
}

// The transaction is over: its claims are no longer in flight (the keys
// are finished, or their claims rolled back or committed as rows).
void on_xact(XactEvent event, void*) {
  if (header == nullptr) return;
  if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT && event != XACT_EVENT_PREPARE &&
      event != XACT_EVENT_PARALLEL_COMMIT && event != XACT_EVENT_PARALLEL_ABORT)
    return;
  OpenClaims* o = my_open_claims();
  if (o == nullptr || o->used == 0) return;
  change_begins(*o);
  o->used = 0;
  change_ends(*o);
}

// A copy of one backend's entry, read while no change was under way
// (false: it changed under every try, or shows nothing).
bool read_open_claims(const OpenClaims& o, OpenClaims* copy) {
  for (int tries = 0; tries < 8; ++tries) {
    const uint32 before = pg_atomic_read_u32(const_cast<pg_atomic_uint32*>(&o.change));
    if (before % 2 != 0) continue;
    pg_read_barrier();
    copy->used = o.used;
    copy->generation = o.generation;
    std::memcpy(copy->of, o.of, sizeof o.of);
    pg_read_barrier();
    if (pg_atomic_read_u32(const_cast<pg_atomic_uint32*>(&o.change)) == before) return copy->used > 0;
  }
  return false;
}

}  // namespace

Size namespace_stats_bytes() {
  const long rows = static_cast<long>(tracked_namespaces) + overflow_rows;
  return MAXALIGN(sizeof(Header)) + open_claims_bytes(compat::max_backends()) + hash_estimate_size(rows, sizeof(Slot));
}

void attach_namespace_stats() {
  const int backends = compat::max_backends();
  bool found = false;
  header = static_cast<Header*>(
      ShmemInitStruct("idempotency namespace counters", MAXALIGN(sizeof(Header)) + open_claims_bytes(backends), &found));
  open_claims = reinterpret_cast<OpenClaims*>(reinterpret_cast<char*>(header) + MAXALIGN(sizeof(Header)));
  if (!found) {
    header->lock = &GetNamedLWLockTranche("idempotency namespaces")->lock;
    pg_atomic_init_u64(&header->generation, 1);
    header->capacity = tracked_namespaces;
    header->tracked = header->rows = 0;
    header->backends = backends;
    for (int i = 0; i < backends; ++i) {
      pg_atomic_init_u32(&open_claims[i].change, 0);
      open_claims[i].used = 0;
      open_claims[i].generation = 0;
    }
  }
  HASHCTL info;
  std::memset(&info, 0, sizeof info);
  info.keysize = sizeof(Key);
  info.entrysize = sizeof(Slot);
  const long rows = static_cast<long>(header->capacity) + overflow_rows;
  table = compat::shmem_init_hash("idempotency namespace counters by name", rows, &info,
                                  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
  static bool registered = false;
  if (!registered) RegisterXactCallback(on_xact, nullptr), registered = true;
}

void count_in(const text* ns, NamespaceCounter c, uint64 n) {
  if (header == nullptr || !track_counters) return;
  if (Slot* slot = slot_of(ns, pg_atomic_read_u64(&header->generation))) pg_atomic_fetch_add_u64(&slot->values[c], n);
}

void count_begin_in(const text* ns, int kind) {
  if (header == nullptr) return;
  const uint64 generation = pg_atomic_read_u64(&header->generation);
  Slot* slot = slot_of(ns, generation);
  if (slot == nullptr) return;
  pg_atomic_fetch_add_u64(&slot->values[ns_begin_fresh + kind], 1);
  if (kind == ns_begin_fresh) note_claim(slot, generation);
}

void reset_namespace_stats() {
  if (header == nullptr) return;
  LWLockAcquire(header->lock, LW_EXCLUSIVE);
  HASH_SEQ_STATUS seq;
  hash_seq_init(&seq, table);
  while (auto* slot = static_cast<Slot*>(hash_seq_search(&seq)))
    (void)hash_search(table, &slot->key, HASH_REMOVE, nullptr);
  header->tracked = header->rows = 0;
  pg_atomic_fetch_add_u64(&header->generation, 1);
  LWLockRelease(header->lock);
}

}  // namespace idem::pg

namespace {

using idem::pg::ns_counter_count;

// One row of idem_namespace_counters as read.
struct Row {
  char name[idem::core::max_namespace_length + 1];
  uint64 values[ns_counter_count];
  const void* slot;
  int64 claims;
  TimestampTz since;
};

}  // namespace

// idem_namespace_counters(): one row per namespace of the current database
// that the counters keep apart, and "_other" (always, when the counters are
// on): the namespace, its counters in the order of NamespaceCounter (the
// microseconds waited as seconds), and the claims in flight that open
// transactions made in it (how many, and since when the oldest's statement
// started; NULL: none). No rows when the counters are off.
IDEM_FUNCTION(idem_namespace_counters) {
  using namespace idem::pg;
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) || (rsinfo->allowedModes & SFRM_Materialize) == 0)
    throw idem::core::Error(idem::core::sqlstate::feature_not_supported,
                            "idem_namespace_counters must be called in a FROM clause");
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    throw idem::core::Error(idem::core::sqlstate::internal_error, "idem_namespace_counters must return rows");
  constexpr int columns = 1 + ns_counter_count + 2;
  if (desc->natts != columns)
    throw idem::core::Error(idem::core::sqlstate::internal_error, "idem_namespace_counters has the wrong columns",
                            "Run ALTER EXTENSION idempotency UPDATE.");
  MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
  Tuplestorestate* store = tuplestore_begin_heap(true, false, work_mem);
  desc = CreateTupleDescCopy(desc);
  MemoryContextSwitchTo(old);
  rsinfo->returnMode = SFRM_Materialize;
  rsinfo->setResult = store;
  rsinfo->setDesc = desc;
  if (header == nullptr) return static_cast<Datum>(0);

  const uint64 generation = pg_atomic_read_u64(&header->generation);
  // The claims in flight, read first: a row made meanwhile shows none yet.
  auto* claimed = static_cast<OpenClaims*>(palloc(sizeof(OpenClaims) * static_cast<Size>(header->backends)));
  int backends = 0;
  for (int i = 0; i < header->backends; ++i)
    if (read_open_claims(open_claims[i], &claimed[backends]) && claimed[backends].generation == generation) ++backends;

  // The rows of this database, copied under the lock.
  LWLockAcquire(header->lock, LW_SHARED);
  auto* rows = static_cast<Row*>(palloc0(sizeof(Row) * static_cast<Size>(header->rows + 1)));
  int n = 0;
  bool has_overflow = false;
  HASH_SEQ_STATUS seq;
  hash_seq_init(&seq, table);
  while (auto* slot = static_cast<Slot*>(hash_seq_search(&seq))) {
    if (slot->key.database != MyDatabaseId) continue;
    Row& r = rows[n++];
    std::memcpy(r.name, slot->key.name, sizeof r.name);
    for (int c = 0; c < ns_counter_count; ++c) r.values[c] = pg_atomic_read_u64(&slot->values[c]);
    r.slot = slot;
    has_overflow = has_overflow || std::strcmp(r.name, overflow_name) == 0;
  }
  LWLockRelease(header->lock);
  if (!has_overflow) std::memcpy(rows[n++].name, overflow_name, overflow_length);

  for (int i = 0; i < n; ++i) {
    Row& r = rows[i];
    for (int b = 0; b < backends && r.slot != nullptr; ++b)
      for (uint32 k = 0; k < claimed[b].used; ++k) {
        if (claimed[b].of[k].slot != r.slot) continue;
        r.since = r.claims == 0 ? claimed[b].of[k].since : std::min(r.since, claimed[b].of[k].since);
        r.claims += claimed[b].of[k].claims;
      }
    Datum values[columns];
    bool nulls[columns] = {};
    values[0] = CStringGetTextDatum(r.name);
    for (int c = 0; c < ns_counter_count; ++c)
      values[1 + c] = c == ns_wait_us ? Float8GetDatum(static_cast<double>(r.values[c]) / USECS_PER_SEC)
                                      : Int64GetDatum(static_cast<int64>(r.values[c]));
    values[1 + ns_counter_count] = Int64GetDatum(r.claims);
    values[2 + ns_counter_count] = TimestampTzGetDatum(r.since);
    nulls[2 + ns_counter_count] = r.claims == 0;
    tuplestore_putvalues(store, desc, values, nulls);
  }
  return static_cast<Datum>(0);
}
