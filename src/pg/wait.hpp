// wait.hpp: a begin's wait for the holder of its key (idem_begin's
// in_flight_wait), as an ordinary lock wait.
#pragma once

#include "postgres.hpp"

extern "C" {
#include "storage/lock.h"
}

namespace idem::pg {

// Waits until transaction xid ends (an invalid xid: until key_lock, held by
// a claim without a row, is free) or the deadline passes. Visible in
// pg_locks, broken by the deadlock detector, cancelled by statement_timeout
// or a cancel request; running out of time is not an error. On a hot
// standby, where the primary's transactions hold no lock, it polls.
void wait_for(TransactionId xid, const LOCKTAG& key_lock, TimestampTz deadline);

}  // namespace idem::pg
