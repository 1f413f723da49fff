// begin.hpp: beginning one key (begin.cpp), which idem_begin does once and
// idem_begin_batch (batch.cpp) for each key its first pass left.
#pragma once

#include "outcome.hpp"
#include "policy.hpp"
#include "postgres.hpp"

extern "C" {
#include "storage/lockdefs.h"
}

namespace idem::pg {

// A batch's in-flight wait and the deadline of the whole call (0: no wait).
struct Wait {
  int64 ms;
  TimestampTz deadline;
};

// A caller's names, for messages.
struct Names {
  const char* function;     // the SQL function, for a read-only transaction's hint
  const char* entry_point;  // the Citus entry point's suffix (<table>_begin)
};
constexpr Names single_names{"idem_begin", "begin"};
constexpr Names batch_names{"idem_begin_batch", "begin_batch"};

// A fingerprint a batch's first pass made (0: none), and whether the
// namespace's pointers left parts of the request out of it: the second
// pass makes it again when pointers were in force at either pass.
struct Hashed {
  Datum hash;
  bool pointed;
};

// The lock a begin takes on its store's table: RowExclusiveLock, as INSERT
// ... ON CONFLICT takes it, when it may write (taking it only after the
// look, a lock upgrade, could deadlock with REINDEX or CREATE INDEX);
// AccessShareLock in a read-only transaction (a standby).
LOCKMODE store_lock_mode();

// The replay window of argument argno: the namespace's (or the defaults')
// when NULL; else positive in every field, under 10,000 years, and no
// longer than the namespace's own, a limit the caller cannot lift.
Interval* replay_window(FunctionCallInfo fcinfo, int argno, const Policy& policy, const text* ns);

// The in-flight wait of argument argno in milliseconds (the defaults' when
// NULL or absent): zero or more in every field, at most INT_MAX ms.
int64 in_flight_wait_ms(FunctionCallInfo fcinfo, int argno, const Policy& policy);

// Begins given_key (checked) with request in namespace ns: the answer of
// idem_begin. fcinfo's arguments 3 and 4 are the replay window and the
// in-flight wait; a batch passes its wait (batch_wait) and what its first
// look made (looked), and the call skips its own first look.
Outcome begin_key(FunctionCallInfo fcinfo, text* ns, text* given_key, Jsonb* request, const Wait* batch_wait,
                  const Names& names, const Hashed* looked = nullptr);

}  // namespace idem::pg
