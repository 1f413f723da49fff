// settings.hpp: the extension's GUCs, and the rule they follow: a setting
// that shapes a record, a claim or a wait is never taken from a session.
#pragma once

namespace idem::pg {

// idempotency.replay_window, in seconds: how long a record replays before
// idem_purge may delete it, when idem_begin is given no window.
extern int replay_window_seconds;

// idempotency.in_flight_wait, in milliseconds: how long idem_begin waits
// for another transaction that holds the same key before answering
// in_flight, when it is given no wait.
extern int in_flight_wait_ms;

// idempotency.in_progress_lease, in seconds: how old an in_progress record
// must be before a begin with the same request may take it over; 0: never.
// Server-wide (PGC_SIGHUP): every session must agree on which claims may
// outlive their transaction.
extern int in_progress_lease_seconds;

// idempotency.store_request: whether records keep the request (for mismatch).
extern bool store_request_default;

// idempotency.max_payload_bytes: the largest request, result or error, as jsonb.
extern int max_payload_bytes;

// idempotency.require_registered_namespace: whether an unregistered
// namespace is an error rather than the GUC defaults.
extern bool require_registered_namespace;

// Defines every GUC (called once from _PG_init). replay_window,
// in_flight_wait, store_request, max_payload_bytes and
// require_registered_namespace are superuser settings that a session cannot
// set (SET, SET LOCAL, set_config, a function's SET clause, a connection's
// options): they come from the server's configuration or from ALTER
// DATABASE / ALTER ROLE ... SET. A session's value would outlive its
// transaction and reach whoever uses the connection next (another client of
// a pool). in_progress_lease is server-wide; track_counters, which shapes
// only the counters, is a superuser setting a session may set.
void define_settings();

// The first of the settings idem_defaults replaced in 1.0.0 whose value
// here is not its built-in default, or nullptr: on a 1.0 schema such a
// value no longer applies, and the store warns of it (policy.cpp).
const char* setting_no_longer_applying();

// Raises 55P02 when a value this session had for one of those settings
// before the library was loaded was refused when it loaded in a way that
// left the built-in default in place of the configured value (a
// connection's option; a database's or role's value the setting does not
// allow), on a 0.9 schema, which still takes its defaults from them. Every
// store call and registry function asks first.
void require_trusted_settings();

}  // namespace idem::pg
