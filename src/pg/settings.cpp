// settings.cpp: the extension's GUCs and the check that keeps the ones
// shaping records, claims and waits out of sessions (settings.hpp).
#include "settings.hpp"

#include "postgres.hpp"

#include <climits>

extern "C" {
#include "utils/guc.h"
}

#include "compat.hpp"
#include "stats.hpp"

namespace idem::pg {

int replay_window_seconds = 24 * 60 * 60;
int in_flight_wait_ms = 0;
int in_progress_lease_seconds = 0;
bool store_request_default = true;
int max_payload_bytes = 16 * 1024 * 1024;
bool require_registered_namespace = false;

namespace {

// False, with the error to raise, when a value comes from a session or a
// connection's options rather than from the server's configuration, a
// database or a role. Called by PostgreSQL: never throws.
bool from_configuration(const char* name, const char* hint, GucSource source) noexcept {
  if (source != PGC_S_SESSION && source != PGC_S_CLIENT) return true;
  GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
  GUC_check_errmsg("parameter \"%s\" cannot be set in a session", name);
  GUC_check_errdetail(
      "A session's value would outlive its transaction and shape the records and waits of whoever uses the "
      "connection next, such as another client of a connection pool.");
  GUC_check_errhint("%s", hint);
  return false;
}

bool check_replay_window(int*, void**, GucSource source) noexcept {
  return from_configuration("idempotency.replay_window",
                            "Pass replay_window to idem_begin, configure the namespace's with "
                            "idem_namespace_configure, or have a superuser set it in postgresql.conf or with "
                            "ALTER DATABASE or ALTER ROLE ... SET.",
                            source);
}

bool check_in_flight_wait(int*, void**, GucSource source) noexcept {
  return from_configuration("idempotency.in_flight_wait",
                            "Pass in_flight_wait to idem_begin, or have a superuser set it in postgresql.conf or "
                            "with ALTER DATABASE or ALTER ROLE ... SET.",
                            source);
}

bool check_store_request(bool*, void**, GucSource source) noexcept {
  return from_configuration("idempotency.store_request",
                            "Configure the namespace's with idem_namespace_configure, or set it in "
                            "postgresql.conf or with ALTER DATABASE or ALTER ROLE ... SET.",
                            source);
}

bool check_max_payload_bytes(int*, void**, GucSource source) noexcept {
  return from_configuration("idempotency.max_payload_bytes",
                            "Configure the namespace's with idem_namespace_configure, or set it in "
                            "postgresql.conf or with ALTER DATABASE or ALTER ROLE ... SET.",
                            source);
}

bool check_require_registered(bool*, void**, GucSource source) noexcept {
  return from_configuration("idempotency.require_registered_namespace",
                            "Set it in postgresql.conf or with ALTER DATABASE or ALTER ROLE ... SET.", source);
}

}  // namespace

void define_settings() {
  DefineCustomIntVariable(
      "idempotency.replay_window", "Default replay window of idem_begin.",
      "How long a record replays before idem_purge may delete it, when idem_begin is given no window. "
      "Not settable in a session.",
      &replay_window_seconds, 24 * 60 * 60, 1, INT_MAX, PGC_SUSET, GUC_UNIT_S, check_replay_window, nullptr,
      nullptr);
  DefineCustomIntVariable(
      "idempotency.in_flight_wait", "How long idem_begin waits for a concurrent holder of the same key.",
      "0 answers in_flight at once; otherwise idem_begin waits up to this long for the other transaction "
      "to end and then answers with its outcome, when it is given no wait. Not settable in a session.",
      &in_flight_wait_ms, 0, 0, INT_MAX, PGC_SUSET, GUC_UNIT_MS, check_in_flight_wait, nullptr, nullptr);
  DefineCustomBoolVariable(
      "idempotency.track_counters", "Whether calls add to the counters of idem_stats.",
      "Takes effect only when the library is in shared_preload_libraries.", &track_counters, true, PGC_SUSET, 0,
      nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "idempotency.in_progress_lease", "Default in-progress lease of a namespace.",
      "An in_progress record older than this may be taken over by a begin with the same request; "
      "0 never takes one over. A namespace's in_progress_lease overrides it. Server-wide.",
      &in_progress_lease_seconds, 0, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_S, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable(
      "idempotency.store_request", "Whether records keep the request, to show it on a mismatch.",
      "Off keeps only the request's SHA-256. A namespace's store_request overrides it. Not settable in a "
      "session.",
      &store_request_default, true, PGC_SUSET, 0, check_store_request, nullptr, nullptr);
  DefineCustomIntVariable(
      "idempotency.max_payload_bytes", "Largest request, result or error the store accepts, as jsonb.",
      "Larger ones are refused before anything is written. A namespace's max_payload_bytes overrides it. "
      "Not settable in a session.",
      &max_payload_bytes, 16 * 1024 * 1024, 1, INT_MAX, PGC_SUSET, GUC_UNIT_BYTE, check_max_payload_bytes,
      nullptr, nullptr);
  DefineCustomBoolVariable(
      "idempotency.require_registered_namespace", "Whether only registered namespaces may be used.",
      "On turns a namespace that idem_namespace_configure never registered into an error. Not settable in a "
      "session.",
      &require_registered_namespace, false, PGC_SUSET, 0, check_require_registered, nullptr, nullptr);
  compat::reserve_guc_prefix("idempotency");
}

}  // namespace idem::pg
