// wait.cpp: the wait for a key's holder (wait.hpp).
#include "wait.hpp"

#include <algorithm>
#include <cstdio>

#include "subxact.hpp"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
}

namespace idem::pg {

namespace {

// Polls until xid has ended, the deadline passes, or an interrupt is raised.
void wait_on_standby(TransactionId xid, TimestampTz deadline) {
  while (TransactionIdIsInProgress(xid)) {
    const long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
    if (remaining <= 0) return;
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, std::min(remaining, 10L),
                    PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
  }
}

// What the lock wait waits for: a transaction, or (xid invalid) the key's
// lock of a claim held by it alone.
struct Awaited {
  TransactionId xid;
  const LOCKTAG* key_lock;
};
void await(void* a) {
  const auto* awaited = static_cast<const Awaited*>(a);
  if (TransactionIdIsValid(awaited->xid)) {
    XactLockTableWait(awaited->xid, nullptr, nullptr, XLTW_None);
  } else {
    (void)LockAcquire(awaited->key_lock, ExclusiveLock, false, false);
    LockRelease(awaited->key_lock, ExclusiveLock, false);
  }
}

// The lock wait itself, for at most remaining ms: lock_timeout is set for
// the wait alone, whatever the session's, and running out of it is caught
// inside a subtransaction; every other error goes on up.
void wait_locked(TransactionId xid, const LOCKTAG& key_lock, long remaining) {
  const int nest_level = NewGUCNestLevel();
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%ld", remaining);
  (void)set_config_option("lock_timeout", timeout, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  Awaited awaited{xid, &key_lock};
  if (ErrorData* error = in_subtransaction(await, &awaited)) {
    if (error->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE) ReThrowError(error);
    FreeErrorData(error);
  }
  AtEOXact_GUC(true, nest_level);
}

}  // namespace

void wait_for(TransactionId xid, const LOCKTAG& key_lock, TimestampTz deadline) {
  if (RecoveryInProgress()) return wait_on_standby(xid, deadline);
  const long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
  if (remaining > 0) wait_locked(xid, key_lock, remaining);
}

}  // namespace idem::pg
