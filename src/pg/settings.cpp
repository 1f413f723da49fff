// settings.cpp: the extension's GUCs and the check that keeps the ones
// shaping records, claims and waits out of sessions (settings.hpp).
#include "settings.hpp"

#include "postgres.hpp"

#include <climits>

extern "C" {
#include "utils/guc.h"
}

#include <string>

#include "../core/error.hpp"
#include "compat.hpp"
#include "extension.hpp"
#include "isolate.hpp"
#include "stats.hpp"

namespace idem::pg {

int replay_window_seconds = 24 * 60 * 60;
int in_flight_wait_ms = 0;
int in_progress_lease_seconds = 0;
bool store_request_default = true;
int max_payload_bytes = 16 * 1024 * 1024;
bool require_registered_namespace = false;

namespace {

// idempotency.purge_pause's storage: idem_purge_batches reads the setting
// through current_setting, so no C code reads it here.
int purge_pause_ms = 0;

// The settings that are never taken from a session, in the order of
// define_settings; each check hook passes its index.
enum Setting { replay_window, in_flight_wait, store_request, max_payload, require_registered, lease, setting_count };
struct Guarded {
  const char* name;
  const char* hint;  // what to do instead of setting it in a session
  bool existed;      // a placeholder held a configured value when the library loaded
  bool accepted;     // a value was accepted while the library was loading
};
Guarded guarded[setting_count] = {
    {"idempotency.replay_window",
     "Pass replay_window to idem_begin, configure the namespace's with idem_namespace_configure, or have a "
     "superuser set it in postgresql.conf or with ALTER DATABASE or ALTER ROLE ... SET.",
     false, false},
    {"idempotency.in_flight_wait",
     "Pass in_flight_wait to idem_begin, or have a superuser set it in postgresql.conf or with ALTER DATABASE or "
     "ALTER ROLE ... SET.",
     false, false},
    {"idempotency.store_request",
     "Configure the namespace's with idem_namespace_configure, or set it in postgresql.conf or with ALTER "
     "DATABASE or ALTER ROLE ... SET.",
     false, false},
    {"idempotency.max_payload_bytes",
     "Configure the namespace's with idem_namespace_configure, or set it in postgresql.conf or with ALTER "
     "DATABASE or ALTER ROLE ... SET.",
     false, false},
    {"idempotency.require_registered_namespace",
     "Set it in postgresql.conf or with ALTER DATABASE or ALTER ROLE ... SET.", false, false},
    {"idempotency.in_progress_lease", nullptr, false, false},
};

// While the library loads, PostgreSQL applies again the values a session
// had for these settings before it knew them (placeholders).
bool loading = false;
// Set when such a value was refused in a way that lost the configured one
// (see define_settings); the setting's index, or -1.
int untrusted = -1;

// False, with the error to raise, when a value comes from a session or a
// connection's options rather than from the server's configuration, a
// database or a role. Called by PostgreSQL: never throws.
bool from_configuration(Setting setting, GucSource source) noexcept {
  if (source != PGC_S_SESSION && source != PGC_S_CLIENT) {
    if (loading && source != PGC_S_DEFAULT) guarded[setting].accepted = true;  // not the built-in default
    return true;
  }
  // A connection's option stands where the configured value did: refused
  // while loading, it leaves the built-in default in its place.
  if (loading && source == PGC_S_CLIENT) untrusted = setting;
  GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
  GUC_check_errmsg("parameter \"%s\" cannot be set in a session", guarded[setting].name);
  GUC_check_errdetail(
      "The store's settings come from the server's configuration, a database or a role, never from a session: a "
      "session's value reaches other statements than the call that needs it, and behind a connection pool, "
      "other clients.");
  GUC_check_errhint("%s", guarded[setting].hint);
  return false;
}

bool check_replay_window(int*, void**, GucSource source) noexcept { return from_configuration(replay_window, source); }
bool check_in_flight_wait(int*, void**, GucSource source) noexcept { return from_configuration(in_flight_wait, source); }
bool check_store_request(bool*, void**, GucSource source) noexcept { return from_configuration(store_request, source); }
bool check_max_payload_bytes(int*, void**, GucSource source) noexcept { return from_configuration(max_payload, source); }
bool check_require_registered(bool*, void**, GucSource source) noexcept {
  return from_configuration(require_registered, source);
}
// PostgreSQL itself refuses the lease from anything but the server's
// configuration (PGC_SIGHUP), before this hook: it only notes acceptance.
bool check_lease(int*, void**, GucSource source) noexcept {
  if (loading && source != PGC_S_DEFAULT) guarded[lease].accepted = true;
  return true;
}

}  // namespace

void define_settings() {
  // Loaded after sessions started (not preloaded), the library meets the
  // values PostgreSQL kept as placeholders, and applies them again when it
  // defines each setting: first the value that stands for the configured
  // one, then the ones set in the session. When the first is refused (a
  // connection's option stood there, or a database's or role's value the
  // setting does not allow), PostgreSQL leaves the built-in default in its
  // place: the configured value is lost for this session, and the store
  // refuses to run in it (require_trusted_settings).
  // A placeholder's reset value is the one that stood for the configured
  // value (the server's, a database's, a role's or a connection's); a value
  // only SET in the session hid nothing, and its refusal loses nothing.
  // (PostgreSQL 16 and later give a placeholder an empty reset value until
  // one is set; none of these settings can be empty.)
  const bool late = !process_shared_preload_libraries_in_progress;
  for (Guarded& g : guarded) {
    const char* reset = late && GetConfigOption(g.name, true, false) != nullptr ? GetConfigOptionResetString(g.name)
                                                                                : nullptr;
    g.existed = reset != nullptr && reset[0] != '\0';
  }
  loading = true;
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
  // A server setting can be defined only while the server starts (when the
  // library is preloaded, the only case in which it means something).
  if (process_shared_preload_libraries_in_progress)
    DefineCustomIntVariable(
        "idempotency.tracked_namespaces", "How many namespaces the counters of idem_metrics keep apart.",
        "Of all databases; a namespace first counted once that many are counts under \"_other\" in its "
        "database. Defined only when the library is in shared_preload_libraries.",
        &tracked_namespaces, 1000, 0, 100000, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "idempotency.in_progress_lease", "Default in-progress lease of a namespace.",
      "An in_progress record older than this may be taken over by a begin with the same request; "
      "0 never takes one over. A namespace's in_progress_lease overrides it. Server-wide.",
      &in_progress_lease_seconds, 0, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_S, check_lease, nullptr, nullptr);
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
  DefineCustomIntVariable(
      "idempotency.purge_pause", "Pause of idem_purge_batches after each chunk it commits.",
      "0 purges chunk after chunk; a pause leaves the cores and the WAL to the requests meanwhile, at the "
      "cost of a longer purge. At most 10 s: the pause holds a snapshot, as any statement does. Any role may "
      "set it, also for a pg_cron job's role with ALTER ROLE ... SET.",
      &purge_pause_ms, 0, 0, 10 * 1000, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "idempotency.maintenance_timeout", "How long one store's purge chunk or statistics read may run.",
      "A store that runs longer (its triggers or row security wait or sleep) is cancelled, reported in a "
      "WARNING and skipped, so that the other stores are still purged and shown. 0: no limit.",
      &maintenance_timeout_ms, 5000, 0, INT_MAX, PGC_SUSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
  loading = false;
  for (int i = 0; i < setting_count && untrusted < 0; ++i)
    if (guarded[i].existed && !guarded[i].accepted) untrusted = i;
  compat::reserve_guc_prefix("idempotency");
}

void require_trusted_settings() {
  // From 1.0.0 the defaults are idem_defaults' row: these settings only
  // serve a 0.9 schema, the one a session's value could change.
  if (untrusted < 0 || OidIsValid(registry().defaults)) return;
  throw core::Error(
      core::sqlstate::cant_change_runtime_param, "the idempotency settings of this session cannot be trusted",
      std::string(guarded[untrusted].name) +
          " was set for this session before the extension's library was loaded (by a connection option, or by a "
          "database's or role's value the setting does not allow) and was refused when it loaded: the session "
          "would use the built-in default in place of the configured value.",
      "Reconnect without setting it (and remove database or role values of idempotency.in_progress_lease), or "
      "load the library with shared_preload_libraries, which refuses such values when they are set.");
}

const char* setting_no_longer_applying() {
  if (replay_window_seconds != 24 * 60 * 60) return "idempotency.replay_window";
  if (in_progress_lease_seconds != 0) return "idempotency.in_progress_lease";
  if (!store_request_default) return "idempotency.store_request";
  if (max_payload_bytes != 16 * 1024 * 1024) return "idempotency.max_payload_bytes";
  if (in_flight_wait_ms != 0) return "idempotency.in_flight_wait";
  if (require_registered_namespace) return "idempotency.require_registered_namespace";
  return nullptr;
}

}  // namespace idem::pg
