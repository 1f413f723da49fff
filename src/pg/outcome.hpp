// outcome.hpp: idem_outcome, the row idem_begin and idem_begin_batch answer:
// its kinds, the columns each kind fills, and the tuple formed from them.
#pragma once

#include "policy.hpp"
#include "postgres.hpp"
#include "probe.hpp"

extern "C" {
#include "access/htup.h"
#include "access/tupdesc.h"
}

namespace idem::pg {

enum Kind { fresh, in_flight, prior_result, prior_error, mismatch, kind_count };

// Columns of idem_outcome, in order.
enum Field { f_kind, f_result, f_error, f_recorded_request, f_recorded_hash, f_submitted_hash, f_attempt, f_age,
             f_fence, f_lease_ends_at, f_takeover, f_recovery_point, f_recovery_state, field_count };

// The outcome's tuple descriptor and enum label OIDs for the function
// called; kept per backend (see outcome.cpp).
struct OutcomeType {
  Oid type;
  uint64 identifier;
  TupleDesc desc;
  Datum kinds[kind_count];
};
OutcomeType& outcome_type(FunctionCallInfo fcinfo);

// An answer: its kind and the columns of idem_outcome after kind, all NULL
// but submitted_hash unless a builder below fills them.
struct Outcome {
  Kind kind;
  Datum values[field_count];
  bool nulls[field_count];
};

// What a takeover found of the attempts before it: the last recovery point
// and its state (NULL: none recorded).
struct Recovered {
  Datum point, state;
  bool point_null, state_null;
};
constexpr Recovered nothing_recovered{0, 0, true, true};

// fresh: the attempt, the fence the transitions prove the claim with, when
// its lease ends (NULL without one), whether it takes over an attempt that
// may have acted, and that attempt's last recovery point.
Outcome fresh_outcome(Datum submitted, int32 attempt, int64 fence, const Policy& policy, TimestampTz now,
                      bool takeover, const Recovered& recovered);

// in_flight, with how long ago the holder claimed the key (or took it over,
// or last extended its lease) when that is known, and, for a claim another
// transaction committed under a lease, when a begin may take it over.
Outcome in_flight_outcome(Datum submitted, const Probe& p, TimestampTz now, const Policy& policy);

// A mismatch with the claim or record of the key: its request hash and its
// request (request_null: none kept). With store_request off the recorded
// request is never shown, even one kept from before it was switched off.
Outcome mismatch_outcome(Datum submitted, Datum recorded_hash, Datum recorded_request, bool request_null,
                         const Policy& policy);

// The answer of a final record (committed or failed, or a record with
// another request): its replay, or a mismatch.
Outcome finished_outcome(const Probe& p, Datum submitted, const Policy& policy);

// The answer as a tuple of idem_outcome as t describes it.
HeapTuple to_tuple(const OutcomeType& t, Outcome& o);

// The answer of a single call in namespace ns, counted.
Datum to_datum(FunctionCallInfo fcinfo, const text* ns, Outcome& o);

}  // namespace idem::pg
