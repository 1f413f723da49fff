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

// idempotency.tracked_namespaces: how many namespaces of all databases the
// per-namespace counters keep apart; the others of a database are counted
// together under the name "_other" (namespace_stats.cpp).
extern int tracked_namespaces;

// One per-namespace counter per thing counted; the first five follow the
// order of the idem_kind enum, as Counter's do.
enum NamespaceCounter : int {
  ns_begin_fresh,
  ns_begin_in_flight,
  ns_begin_prior_result,
  ns_begin_prior_error,
  ns_begin_mismatch,
  ns_commits,
  ns_permanent_failures,
  ns_transient_failures,
  ns_waits,
  ns_wait_us,  // microseconds waited, summed
  ns_takeovers,
  ns_recovery_points,
  ns_released_keys,
  ns_purged_rows,
  ns_counter_count
};

// Adds n to counter c of namespace ns (of the current database); does
// nothing when the counters are off. Cannot fail.
void count_in(const text* ns, NamespaceCounter c, uint64 n = 1);

// Counts a begin's outcome of kind k in namespace ns (both the server's
// counter and the namespace's); a fresh answer is also shown as a claim in
// flight of ns until the current transaction ends. Cannot fail.
void count_begin(const text* ns, int kind);

// The namespace's part of count_begin (namespace_stats.cpp), once the
// counters are known to be on.
void count_begin_in(const text* ns, int kind);

// Adds n to counter c; does nothing when the counters are off (the library
// was not preloaded, or track_counters is off). Cannot fail.
void count(Counter c, uint64 n = 1);

// From _PG_init while shared_preload_libraries is processed: asks for the
// shared memory and installs the hook that sets it up.
void request_stats_memory();

// The per-namespace counters' part of it (namespace_stats.cpp): how many
// bytes, and finding (or, in the postmaster, making) them; called under
// AddinShmemInitLock.
Size namespace_stats_bytes();
void attach_namespace_stats();

// Zeroes every namespace's counters and forgets the namespaces (idem_stats_reset).
void reset_namespace_stats();

}  // namespace idem::pg
