// module.cpp: the library's identity for PostgreSQL's loader and its
// start-up: the GUCs, the cache invalidation hook and, when preloaded, the
// shared memory for the counters.
#include "postgres.hpp"

#include <climits>

extern "C" {
#include "utils/guc.h"
}

#include "claims.hpp"
#include "compat.hpp"
#include "policy.hpp"
#include "record.hpp"
#include "settings.hpp"
#include "stats.hpp"

extern "C" {
IDEM_PG_MODULE_MAGIC;
void _PG_init(void);
}

namespace idem::pg {
int replay_window_seconds = 24 * 60 * 60;
int in_flight_wait_ms = 0;
int in_progress_lease_seconds = 0;
bool store_request_default = true;
int max_payload_bytes = 16 * 1024 * 1024;
bool require_registered_namespace = false;
}  // namespace idem::pg

// Runs once per backend when the library is loaded; nothing here can throw.
void _PG_init(void) {
  DefineCustomIntVariable(
      "idempotency.replay_window", "Default replay window of idem_begin.",
      "How long a record replays before idem_purge may delete it, when idem_begin is given no window.",
      &idem::pg::replay_window_seconds, 24 * 60 * 60, 1, INT_MAX, PGC_USERSET, GUC_UNIT_S, nullptr, nullptr,
      nullptr);
  DefineCustomIntVariable(
      "idempotency.in_flight_wait", "How long idem_begin waits for a concurrent holder of the same key.",
      "0 answers in_flight at once; otherwise idem_begin waits up to this long for the other transaction "
      "to end and then answers with its outcome.",
      &idem::pg::in_flight_wait_ms, 0, 0, INT_MAX, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable(
      "idempotency.track_counters", "Whether calls add to the counters of idem_stats.",
      "Takes effect only when the library is in shared_preload_libraries.", &idem::pg::track_counters, true,
      PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "idempotency.in_progress_lease", "Default in-progress lease of a namespace.",
      "An in_progress record older than this may be taken over by a begin with the same request; "
      "0 never takes one over. A namespace's in_progress_lease overrides it.",
      &idem::pg::in_progress_lease_seconds, 0, 0, INT_MAX, PGC_SUSET, GUC_UNIT_S, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable(
      "idempotency.store_request", "Whether records keep the request, to show it on a mismatch.",
      "Off keeps only the request's SHA-256. A namespace's store_request overrides it.",
      &idem::pg::store_request_default, true, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "idempotency.max_payload_bytes", "Largest request, result or error the store accepts, as jsonb.",
      "Larger ones are refused before anything is written. A namespace's max_payload_bytes overrides it.",
      &idem::pg::max_payload_bytes, 16 * 1024 * 1024, 1, INT_MAX, PGC_SUSET, GUC_UNIT_BYTE, nullptr, nullptr,
      nullptr);
  DefineCustomBoolVariable(
      "idempotency.require_registered_namespace", "Whether only registered namespaces may be used.",
      "On turns a namespace that idem_namespace_configure never registered into an error.",
      &idem::pg::require_registered_namespace, false, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  idem::pg::compat::reserve_guc_prefix("idempotency");
  idem::pg::register_record_invalidation();
  idem::pg::register_policy_invalidation();
  idem::pg::register_claim_callbacks();
  if (process_shared_preload_libraries_in_progress) idem::pg::request_stats_memory();
}
