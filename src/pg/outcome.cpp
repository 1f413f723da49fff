// outcome.cpp: forming idem_outcome rows (outcome.hpp).
#include "outcome.hpp"

#include <algorithm>

extern "C" {
#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
}

#include "../core/decide.hpp"
#include "../core/error.hpp"
#include "stats.hpp"
#include "text.hpp"

namespace idem::pg {

static_assert(begin_mismatch - begin_fresh == mismatch, "begin counters follow the kinds");

namespace {

constexpr const char* kind_labels[kind_count] = {"fresh", "in_flight", "prior_result", "prior_error", "mismatch"};

// Kept for the backend rather than in fn_extra: a prepared statement gets a
// new FmgrInfo for every execution, so fn_extra would be rebuilt on every
// call (about 5,000 instructions). Of the last result type seen (idem_begin
// and idem_begin_batch share it), valid while the type cache describes it
// as it did (tupDesc_identifier changes when an update script alters it).
OutcomeType kept{};

Outcome outcome(Kind kind, Datum submitted) {
  Outcome o;
  o.kind = kind;
  for (bool& n : o.nulls) n = true;
  o.values[f_submitted_hash] = submitted, o.nulls[f_submitted_hash] = false;
  return o;
}

}  // namespace

OutcomeType& outcome_type(FunctionCallInfo fcinfo) {
  TypeCacheEntry* type = lookup_type_cache(get_func_rettype(fcinfo->flinfo->fn_oid), TYPECACHE_TUPDESC);
  if (type->tupDesc == nullptr)
    throw core::Error(core::sqlstate::internal_error, "idem_begin must return idem_outcome");
  if (kept.desc != nullptr && kept.type == type->type_id && kept.identifier == type->tupDesc_identifier)
    return kept;
  // A type with more columns than this library knows would be formed from
  // values past the end of Outcome's arrays (docs/internals.md, "Entry
  // points across releases").
  if (type->tupDesc->natts > field_count)
    throw core::Error(core::sqlstate::internal_error, "idem_outcome has more columns than this library knows",
                      "Install the library of the extension's version, then reconnect.");
  const uint64 identifier = type->tupDesc_identifier;
  Datum kinds[kind_count];
  const Oid kind_type = TupleDescAttr(type->tupDesc, 0)->atttypid;
  for (int k = 0; k < kind_count; ++k)
    kinds[k] = DirectFunctionCall2(enum_in, CStringGetDatum(kind_labels[k]), ObjectIdGetDatum(kind_type));
  MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
  TupleDesc desc = BlessTupleDesc(CreateTupleDescCopy(type->tupDesc));
  MemoryContextSwitchTo(old);
  if (kept.desc != nullptr) FreeTupleDesc(kept.desc);
  kept.type = type->type_id, kept.identifier = identifier, kept.desc = desc;
  std::copy(kinds, kinds + kind_count, kept.kinds);
  return kept;
}

Outcome fresh_outcome(Datum submitted, int32 attempt, int64 fence, const Policy& policy, TimestampTz now,
                      bool takeover, const Recovered& recovered) {
  Outcome o = outcome(fresh, submitted);
  o.values[f_attempt] = Int32GetDatum(attempt), o.nulls[f_attempt] = false;
  o.values[f_fence] = Int64GetDatum(fence), o.nulls[f_fence] = false;
  if (policy.lease_us > 0)
    o.values[f_lease_ends_at] = TimestampTzGetDatum(now + policy.lease_us), o.nulls[f_lease_ends_at] = false;
  o.values[f_takeover] = BoolGetDatum(takeover), o.nulls[f_takeover] = false;
  o.values[f_recovery_point] = recovered.point, o.nulls[f_recovery_point] = recovered.point_null;
  o.values[f_recovery_state] = recovered.state, o.nulls[f_recovery_state] = recovered.state_null;
  return o;
}

// While the holder's transaction runs no begin takes its claim over, so
// lease_ends_at is shown only for a claim another transaction committed.
Outcome in_flight_outcome(Datum submitted, const Probe& p, TimestampTz now, const Policy& policy) {
  Outcome o = outcome(in_flight, submitted);
  if (!p.began_known) return o;
  auto* age = static_cast<Interval*>(palloc0(sizeof(Interval)));
  age->time = std::max<int64>(0, now - p.updated_at);
  o.values[f_age] = IntervalPGetDatum(age), o.nulls[f_age] = false;
  if (policy.lease_us > 0 && p.found == Found::row && !p.own)
    o.values[f_lease_ends_at] = TimestampTzGetDatum(takeover_from(p, policy)), o.nulls[f_lease_ends_at] = false;
  return o;
}

Outcome mismatch_outcome(Datum submitted, Datum recorded_hash, Datum recorded_request, bool request_null,
                         const Policy& policy) {
  Outcome o = outcome(mismatch, submitted);
  o.values[f_recorded_request] = recorded_request;
  o.nulls[f_recorded_request] = request_null || !policy.store_request;
  o.values[f_recorded_hash] = recorded_hash, o.nulls[f_recorded_hash] = false;
  return o;
}

Outcome finished_outcome(const Probe& p, Datum submitted, const Policy& policy) {
  core::Look look{};
  look.found = Found::row, look.status = p.status;
  look.same_request = same_bytes(DatumGetByteaPP(p.request_hash), DatumGetByteaPP(submitted));
  const core::Step step = core::replay_of(look);
  if (step == core::Step::mismatch)
    return mismatch_outcome(submitted, p.request_hash, p.request_payload, p.request_null, policy);
  Outcome o = outcome(step == core::Step::prior_result ? prior_result : prior_error, submitted);
  if (o.kind == prior_result)
    o.values[f_result] = p.result_payload, o.nulls[f_result] = p.result_null;
  else
    o.values[f_error] = p.error_payload, o.nulls[f_error] = p.error_null;
  return o;
}

HeapTuple to_tuple(const OutcomeType& t, Outcome& o) {
  o.values[f_kind] = t.kinds[o.kind], o.nulls[f_kind] = false;
  return heap_form_tuple(t.desc, o.values, o.nulls);
}

Datum to_datum(FunctionCallInfo fcinfo, const text* ns, Outcome& o) {
  count_begin(ns, o.kind);
  return HeapTupleGetDatum(to_tuple(outcome_type(fcinfo), o));
}

}  // namespace idem::pg
