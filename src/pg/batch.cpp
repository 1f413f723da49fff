// batch.cpp: idem_begin_batch(namespace, keys, requests, replay_window,
// in_flight_wait): each key begun as idem_begin would begin it, in one call.
#include "begin.hpp"

#include <algorithm>
#include <cstring>
#include <string>

extern "C" {
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

#include "../core/decide.hpp"
#include "../core/error.hpp"
#include "canonical.hpp"
#include "citus.hpp"
#include "guard.hpp"
#include "lock_tags.hpp"
#include "probe.hpp"
#include "stats.hpp"
#include "store.hpp"
#include "text.hpp"

namespace idem::pg {

namespace {

// The most keys one batch takes: its answers are kept until the last key
// is begun (a tuple each), and its claims held to the transaction's end.
constexpr int max_batch = 10000;

// Raises e again with element i of what (keys, requests) named in its detail.
[[noreturn]] void element_error(const core::Error& e, int i, const char* what) {
  throw core::Error(e.sqlstate(), e.message(), "Element " + std::to_string(i + 1) + " of " + what + ": " + e.detail(),
                    e.hint());
}

// Element i of array values (nulls), for a batch: a key checked as
// idem_parse does, or a request; an error names the element.
text* batch_key(Datum* values, bool* nulls, int i) {
  if (nulls[i])
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency key must not be null",
                      "Element " + std::to_string(i + 1) + " of keys is NULL; pass the keys that idem_parse or "
                      "idem_mint produced.");
  try {
    return key_of(DatumGetTextPP(values[i]));
  } catch (const core::Error& e) {
    element_error(e, i, "keys");
  }
}

// The elements of one-dimensional array argument argno (NULL: an error
// naming what); an array of more dimensions is refused.
int batch_elements(FunctionCallInfo fcinfo, int argno, const char* what, Oid type, Datum** values, bool** nulls) {
  if (PG_ARGISNULL(argno))
    throw core::Error(core::sqlstate::invalid_parameter_value, std::string("idempotency ") + what + " must not be null",
                      "Pass an array, one element per key.");
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(argno);
  if (ARR_NDIM(array) > 1)
    throw core::Error(core::sqlstate::invalid_parameter_value, std::string("idempotency ") + what +
                          " must be a one-dimensional array",
                      "It has " + std::to_string(ARR_NDIM(array)) + " dimensions.");
  if (ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array)) > max_batch)
    throw core::Error(core::sqlstate::program_limit_exceeded, "too many idempotency keys in one batch",
                      "The batch has " + std::to_string(ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array))) + " " +
                          what + "; at most " + std::to_string(max_batch) + " keys are begun in one call.",
                      "Split it into several calls.");
  int16 length;
  bool byval;
  char align;
  get_typlenbyvalalign(type, &length, &byval, &align);
  int n = 0;
  deconstruct_array(array, type, length, byval, align, values, nulls, &n);
  return n;
}

// What a batch checks before it begins keys, under policy: a store
// distributed by key is refused (a batch's keys live on several nodes), and
// the window and every request's size must pass (the element named); with
// answered, only the requests of the keys not answered yet.
void check_batch(FunctionCallInfo fcinfo, const text* ns, const Policy& policy, int n, Datum* requests,
                 HeapTuple* answered) {
  if (citus_distributes(policy.store) && citus_table(policy.store).column == col_key_value)
    throw core::Error(core::sqlstate::feature_not_supported,
                      "idem_begin_batch cannot begin keys of a store distributed by key",
                      "The store of idempotency namespace \"" + string_of(ns) +
                          "\" is distributed by key_value: a batch's keys live on several nodes.",
                      "Call idem_begin (its entry point) for each key, or distribute the store by namespace "
                      "(docs/scale-out.md).");
  (void)replay_window(fcinfo, 3, policy, ns);
  for (int i = 0; i < n; ++i) {
    if (answered != nullptr && answered[i] != nullptr) continue;  // replayed already
    try {
      check_payload_size(DatumGetJsonbP(requests[i]), "request", ns, policy);
    } catch (const core::Error& e) {
      element_error(e, i, "requests");
    }
  }
}

// A batch's keys and what is known of them: the i-th key (checked) with
// the i-th request; order, the order in which they are begun; answers[i]
// once the key is answered (with its kind), else hashes[i] once the first
// pass left it to the second.
struct Batch {
  int n;
  text** keys;
  Datum* requests;
  int* order;
  HeapTuple* answers;
  Kind* kinds;
  Hashed* hashes;
  OutcomeType type;         // its desc a copy in the query's memory, the result's
  MemoryContext context;    // the answers'
  MemoryContext per_key;    // reset after each key
};

// Whether two policies answer a first look alike: they look it up alike,
// and both show the recorded request or neither (a batch's answers are
// formed under the first; a single begin answers under the second).
bool same_looks(const Policy& a, const Policy& b) {
  return same_lookup(a, b) && a.store_request == b.store_request;
}

// One look at each key (first_pass), in order, through prober under policy.
// A committed or failed record answers its key (its replay, or a mismatch);
// every other key, and a later copy of one, is left with its fingerprint.
// Returns how many keys are left.
int look_at_keys(Prober* prober, const Policy& policy, Batch& b) {
  int pending = 0;
  for (int k = 0; k < b.n; ++k) {
    CHECK_FOR_INTERRUPTS();
    const int i = b.order[k];
    // A later copy of a key left undecided is left too: it is begun after
    // the earlier one, as a second call would be.
    const bool copy = k > 0 && b.hashes[b.order[k - 1]].hash != 0 && same_bytes(b.keys[b.order[k - 1]], b.keys[i]);
    MemoryContextSwitchTo(b.per_key);
    const Datum submitted =
        PointerGetDatum(request_hash_bytea(&DatumGetJsonbP(b.requests[i])->root, policy.ignore));
    // The row's values are read where they are, and copied once, into the answer.
    const Probe p = probe_in_place(prober, stored_key(b.keys[i], policy), b.keys[i]);
    MemoryContextSwitchTo(b.context);
    if (!copy && final_unlocked(p)) {
      Outcome o = finished_outcome(p, submitted, policy);
      b.answers[i] = to_tuple(b.type, o);
      b.kinds[i] = o.kind;
    } else {
      b.hashes[i] = Hashed{datumCopy(submitted, false, -1), policy.ignore != nullptr};
      ++pending;
    }
    MemoryContextReset(b.per_key);
  }
  return pending;
}

// Forgets every answer and fingerprint of a look: each key is begun under
// the namespace's lock, its fingerprint made there.
void forget_looks(Batch& b) {
  for (int i = 0; i < b.n; ++i) b.answers[i] = nullptr, b.hashes[i] = Hashed{0, false};
}

// The batch's first pass: its keys looked at without the namespace's lock,
// through one store opened once (returned in *opened, whose locks the batch
// gives back before it waits for the namespace's lock) and one prober,
// under policy, read before the store was opened. The policy read again
// after the last key stands for the read a single begin makes after its
// probe: if it differs in what decides an answer (same_looks), no answer
// stands and every key is left to the second pass, which looks again under
// the namespace's lock. Returns how many keys are left.
int first_pass(FunctionCallInfo fcinfo, text* ns, const Policy& policy, Batch& b, Store* opened) {
  if (b.n == 0) return 0;
  refuse_where_citus_would_split_the_store(fcinfo, citus_distributes(policy.store));
  // A store a batch may use routes every key alike (check_batch): the
  // first key stands for all of them.
  MemoryContextSwitchTo(b.per_key);
  const Call call{stored_key(b.keys[b.order[0]], policy), policy.hash_keys, batch_names.entry_point};
  *opened = open_store(ns, policy.store, store_lock_mode(), call);
  MemoryContextSwitchTo(b.context);
  MemoryContextReset(b.per_key);
  Prober* prober = open_prober(*opened, ns);
  int pending = look_at_keys(prober, policy, b);
  close_prober(prober);
  if (!same_looks(authorize(ns), policy)) {
    forget_looks(b);
    pending = b.n;
  }
  return pending;
}

// The batch's keys (checked) and requests from fcinfo's arguments 1 and 2.
void read_batch(FunctionCallInfo fcinfo, Batch& b) {
  Datum* key_values;
  bool* key_nulls;
  bool* request_nulls;
  b.n = batch_elements(fcinfo, 1, "keys", TEXTOID, &key_values, &key_nulls);
  const int requests = batch_elements(fcinfo, 2, "requests", JSONBOID, &b.requests, &request_nulls);
  if (b.n != requests)
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency keys and requests differ in length",
                      "There are " + std::to_string(b.n) + " keys and " + std::to_string(requests) +
                          " requests; pass one request per key, in the same order.");
  b.keys = static_cast<text**>(palloc(sizeof(text*) * (b.n > 0 ? b.n : 1)));
  for (int i = 0; i < b.n; ++i) b.keys[i] = batch_key(key_values, key_nulls, i);
  for (int i = 0; i < b.n; ++i)
    if (request_nulls[i])
      throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency request must not be null",
                        "Element " + std::to_string(i + 1) + " of requests is NULL; use 'null'::jsonb for a JSON "
                        "null.");
}

// The order in which the keys are begun: by their bytes, then by position
// (so that two batches lock their common keys in one order and cannot
// deadlock, and a key given twice is begun twice, in order).
void order_keys(Batch& b) {
  b.order = static_cast<int*>(palloc(sizeof(int) * (b.n > 0 ? b.n : 1)));
  for (int i = 0; i < b.n; ++i) b.order[i] = i;
  text** keys = b.keys;
  std::stable_sort(b.order, b.order + b.n, [keys](int x, int y) {
    const int lx = VARSIZE_ANY_EXHDR(keys[x]), ly = VARSIZE_ANY_EXHDR(keys[y]);
    const int c = memcmp(VARDATA_ANY(keys[x]), VARDATA_ANY(keys[y]), std::min(lx, ly));
    return c != 0 ? c < 0 : lx < ly;
  });
}

// Room for the answers, and the result's descriptor in the query's memory.
void prepare_answers(FunctionCallInfo fcinfo, ReturnSetInfo* rsinfo, Batch& b) {
  const int room = b.n > 0 ? b.n : 1;
  b.context = CurrentMemoryContext;
  b.per_key = AllocSetContextCreate(b.context, "idem_begin_batch key", ALLOCSET_DEFAULT_SIZES);
  b.answers = static_cast<HeapTuple*>(palloc0(sizeof(HeapTuple) * room));
  b.kinds = static_cast<Kind*>(palloc(sizeof(Kind) * room));
  b.hashes = static_cast<Hashed*>(palloc0(sizeof(Hashed) * room));
  b.type = outcome_type(fcinfo);
  MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
  b.type.desc = CreateTupleDescCopy(b.type.desc);
  MemoryContextSwitchTo(old);
}

// The second pass: the keys the first left, begun under the namespace's
// lock in the same order. As idem_begin does, the lock is taken at once if
// it is free, keeping the first pass's locks on the store; if not, those go
// back first (a lock the transaction held before the call stays held), and
// the wait holds none of them.
void second_pass(FunctionCallInfo fcinfo, text* ns, Batch& b, const Store& opened, const Wait& wait) {
  if (!try_lock_namespace(ns, ShareLock)) {
    if (OidIsValid(opened.table)) release_store(opened, store_lock_mode());
    lock_namespace(ns, ShareLock);
  }
  check_batch(fcinfo, ns, authorize(ns), b.n, b.requests, b.answers);
  for (int k = 0; k < b.n; ++k) {
    CHECK_FOR_INTERRUPTS();
    const int i = b.order[k];
    if (b.answers[i] != nullptr) continue;
    MemoryContextSwitchTo(b.per_key);
    Outcome o = begin_key(fcinfo, ns, b.keys[i], DatumGetJsonbP(b.requests[i]), &wait, batch_names, &b.hashes[i]);
    MemoryContextSwitchTo(b.context);
    b.answers[i] = to_tuple(b.type, o);
    b.kinds[i] = o.kind;
    MemoryContextReset(b.per_key);
  }
}

// The answers, in the input's order, as the call's rows.
Datum return_rows(ReturnSetInfo* rsinfo, const Batch& b) {
  MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
  Tuplestorestate* store = tuplestore_begin_heap(true, false, work_mem);
  MemoryContextSwitchTo(old);
  for (int i = 0; i < b.n; ++i) tuplestore_puttuple(store, b.answers[i]);
  rsinfo->returnMode = SFRM_Materialize;
  rsinfo->setResult = store;
  rsinfo->setDesc = b.type.desc;
  return static_cast<Datum>(0);
}

// idem_begin_batch: each key begun as idem_begin would begin it, the i-th
// request with the i-th key, in order_keys's order; the answers are
// returned in the input's order. Two passes, as idem_begin does for one
// key: the first looks at each key without the namespace's lock and
// answers the final records (a replay, or a mismatch), as a redelivered
// batch's keys mostly are; the second begins the rest under the lock. The
// in-flight wait bounds the whole call.
Datum begin_batch(FunctionCallInfo fcinfo) {
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) || (rsinfo->allowedModes & SFRM_Materialize) == 0)
    throw core::Error(core::sqlstate::feature_not_supported, "idem_begin_batch cannot return its rows here",
                      "Call it in a FROM clause: SELECT * FROM idem_begin_batch(...).");
  text* ns = namespace_arg(fcinfo, 0);
  Batch b{};
  read_batch(fcinfo, b);
  // Checked before any key is begun, against the policy read first, and
  // again under the namespace's lock before the keys that need it.
  const Policy policy = authorize(ns);
  check_batch(fcinfo, ns, policy, b.n, b.requests, nullptr);
  const int64 wait_ms = in_flight_wait_ms(fcinfo, 4, policy);
  const Wait wait{wait_ms, wait_ms > 0 ? TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms) : 0};
  order_keys(b);
  prepare_answers(fcinfo, rsinfo, b);
  Store opened{};
  if (first_pass(fcinfo, ns, policy, b, &opened) > 0) second_pass(fcinfo, ns, b, opened, wait);
  // Counted once the call has all its answers: a call that fails counts none.
  for (int i = 0; i < b.n; ++i) count_begin(ns, b.kinds[i]);
  return return_rows(rsinfo, b);
}

}  // namespace

}  // namespace idem::pg

// idem_begin_batch as 1.0.0 declares it (see idem_begin_1_0).
IDEM_FUNCTION(idem_begin_batch_1_0) { return idem::pg::begin_batch(fcinfo); }

// idem_begin_batch as 0.9 declares it, for a schema not yet updated.
IDEM_FUNCTION(idem_begin_batch_0_9) { return idem::pg::begin_batch(fcinfo); }
