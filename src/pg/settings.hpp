// settings.hpp: the extension's GUCs (defined in module.cpp's _PG_init).
#pragma once

namespace idem::pg {

// idempotency.replay_window, in seconds: how long a record replays before
// idem_purge may delete it, when idem_begin is given no window.
extern int replay_window_seconds;

// idempotency.in_flight_wait, in milliseconds: how long idem_begin waits
// for another transaction that holds the same key before answering in_flight.
extern int in_flight_wait_ms;

// idempotency.in_progress_lease, in seconds: how old an in_progress record
// must be before a begin with the same request may take it over; 0: never.
extern int in_progress_lease_seconds;

// idempotency.store_request: whether records keep the request (for mismatch).
extern bool store_request_default;

// idempotency.max_payload_bytes: the largest request, result or error, as jsonb.
extern int max_payload_bytes;

// idempotency.require_registered_namespace: whether an unregistered
// namespace is an error rather than the GUC defaults.
extern bool require_registered_namespace;

}  // namespace idem::pg
