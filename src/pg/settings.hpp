// settings.hpp: the extension's GUCs (defined in module.cpp's _PG_init).
#pragma once

namespace idem::pg {

// idempotency.replay_window, in seconds: how long a record replays before
// idem_purge may delete it, when idem_begin is given no window.
extern int replay_window_seconds;

// idempotency.in_flight_wait, in milliseconds: how long idem_begin waits
// for another transaction that holds the same key before answering in_flight.
extern int in_flight_wait_ms;

}  // namespace idem::pg
