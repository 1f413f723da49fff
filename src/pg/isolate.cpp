// isolate.cpp: a store's maintenance in a subtransaction of its own, with a
// time limit (isolate.hpp). The limit is a timeout of the library's own: its
// handler asks for a cancel, as statement_timeout's does, and the cancel that
// follows is told from one the session was sent by the flag it sets.
#include "isolate.hpp"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/elog.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timeout.h"
}

#include "guard.hpp"
#include "stats.hpp"
#include "subxact.hpp"

namespace idem::pg {

int maintenance_timeout_ms = 5000;

namespace {

// The timeout's id, registered on first use (PostgreSQL has a few for
// every library of the backend); and whether it fired during the body.
TimeoutId timeout_id = MAX_TIMEOUTS;
volatile sig_atomic_t timed_out = false;

// Called in the signal handler when the time is up: asks for a cancel, as
// statement_timeout does.
void on_timeout() noexcept {
  timed_out = true;
  InterruptPending = true;
  QueryCancelPending = true;
  SetLatch(MyLatch);
}

// Stops the timeout; a cancel it asked for and no error consumed (it fired
// as the body ended) must not cancel the caller's statement later.
void stop_clock() {
  disable_timeout(timeout_id, false);
  if (timed_out) QueryCancelPending = false;
}

// Whether an error raised by a store's maintenance is the store's to
// answer for (the store is then skipped) rather than the session's: told by
// the session's state, not by the code alone, which a store's trigger may
// raise as it likes. The session's are a cancel it was sent, a purge in a
// read-only transaction, and a serialization failure or deadlock under a
// transaction snapshot.
bool stores_own(const ErrorData* error) {
  if (error->sqlerrcode == ERRCODE_QUERY_CANCELED) return timed_out;
  if (error->sqlerrcode == ERRCODE_READ_ONLY_SQL_TRANSACTION) return !XactReadOnly;
  const bool retry = error->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE ||
                     error->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED;
  return !(retry && IsolationUsesXactSnapshot());
}

// The store as messages name it.
const char* store_name(Oid store) {
  if (!OidIsValid(store)) return "the extension's table idempotency.idempotency_record";
  const char* relname = get_rel_name(store);
  const char* nspname = relname != nullptr ? get_namespace_name(get_rel_namespace(store)) : nullptr;
  return relname != nullptr ? psprintf("%s.%s", quote_identifier(nspname), quote_identifier(relname))
                            : psprintf("relation with OID %u", store);
}

// The body as isolated runs it, inside the subtransaction: the clock
// starts there (so that no failure to begin one leaves it running for the
// caller's statement, stop_clock being the subtransaction's settle), and
// its C++ exceptions become errors.
struct Guarded {
  void (*body)(void*);
  void* arg;
};
void run_guarded(void* g) {
  auto* guarded = static_cast<Guarded*>(g);
  if (maintenance_timeout_ms > 0) enable_timeout_after(timeout_id, maintenance_timeout_ms);
  guard_callback(guarded->body, guarded->arg);
}

}  // namespace

bool isolated(void (*body)(void*), void* arg, Oid store, const char* action) {
  if (timeout_id == MAX_TIMEOUTS) timeout_id = RegisterTimeout(USER_TIMEOUT, on_timeout);
  timed_out = false;
  Guarded guarded{body, arg};
  ErrorData* error = in_subtransaction(run_guarded, &guarded, stop_clock);
  if (error == nullptr) return true;
  if (!stores_own(error)) ReThrowError(error);
  const bool late = timed_out && error->sqlerrcode == ERRCODE_QUERY_CANCELED;
  timed_out = false;
  ereport(WARNING,
          (errcode(ERRCODE_WARNING),
           errmsg("idempotency: skipped store %s: its %s failed", store_name(store), action),
           late ? errdetail("It ran longer than idempotency.maintenance_timeout (%d ms) and was cancelled.",
                            maintenance_timeout_ms)
                : errdetail("SQLSTATE %s: %s", unpack_sql_state(error->sqlerrcode),
                            error->message != nullptr ? error->message : ""),
           errhint("The other stores are not affected. The table's owner can fix its triggers, row security or "
                   "privileges; idem_stats.stores_skipped counts the stores skipped.")));
  FreeErrorData(error);
  count(stores_skipped);
  return false;
}

}  // namespace idem::pg
