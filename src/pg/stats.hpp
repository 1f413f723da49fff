// stats.hpp: cumulative counters of what the store did (begin outcomes,
// transitions, waits, purged rows), kept in shared memory when the library
// is in shared_preload_libraries; see stats.cpp.
#pragma once

#include "postgres.hpp"

namespace idem::pg {

// One counter per thing counted. The first five follow the order of the
// idem_kind enum, so begin counts kind k as begin_fresh + k.
enum Counter : int {
  begin_fresh,
  begin_in_flight,
  begin_prior_result,
  begin_prior_error,
  begin_mismatch,
  commits,
  permanent_failures,
  transient_failures,
  waits,
  purged_rows,
  released_keys,  // 0.7.0: read by idem_stats_released_keys, not in idem_stats_counters's row
  takeovers,        // 0.8.0: read by idem_stats_recovery, with recovery_points
  recovery_points,
  stores_skipped,  // 0.9.2: read by idem_stats_stores_skipped
  counter_count
};

// idempotency.track_counters: whether calls add to the counters.
extern bool track_counters;

// Adds n to counter c; does nothing when the counters are off (the library
// was not preloaded, or track_counters is off). Cannot fail.
void count(Counter c, uint64 n = 1);

// From _PG_init while shared_preload_libraries is processed: asks for the
// shared memory and installs the hook that sets it up.
void request_stats_memory();

}  // namespace idem::pg
