// wait.cpp: the wait for a key's holder (wait.hpp).
#include "wait.hpp"

#include <algorithm>
#include <cstdio>

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

// The lock wait itself, for at most remaining ms: lock_timeout is set for
// the wait alone, whatever the session's, and running out of it is caught
// inside a subtransaction; every other error goes on up.
void wait_locked(TransactionId xid, const LOCKTAG& key_lock, long remaining) {
  const int nest_level = NewGUCNestLevel();
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%ld", remaining);
  (void)set_config_option("lock_timeout", timeout, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  MemoryContext context = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  BeginInternalSubTransaction(nullptr);
  PG_TRY();
  {
    if (TransactionIdIsValid(xid)) {
      XactLockTableWait(xid, nullptr, nullptr, XLTW_None);
    } else {  // a claim held by the key's lock alone
      (void)LockAcquire(&key_lock, ExclusiveLock, false, false);
      LockRelease(&key_lock, ExclusiveLock, false);
    }
    ReleaseCurrentSubTransaction();
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(context);
    ErrorData* error = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(context);
    CurrentResourceOwner = owner;
    if (error->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE) ReThrowError(error);
    FreeErrorData(error);
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  CurrentResourceOwner = owner;
  AtEOXact_GUC(true, nest_level);
}

}  // namespace

void wait_for(TransactionId xid, const LOCKTAG& key_lock, TimestampTz deadline) {
  if (RecoveryInProgress()) return wait_on_standby(xid, deadline);
  const long remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
  if (remaining > 0) wait_locked(xid, key_lock, remaining);
}

}  // namespace idem::pg
