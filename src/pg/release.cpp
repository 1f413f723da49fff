// release.cpp: idem_release_key(namespace, key), an operator's release of
// one key: its record is deleted, so that the next begin of the key answers
// fresh (a result a bug recorded, a poisoned key), without waiting for purge
// or writing to the table by hand. Never under a transaction that holds
// the key, nor under a claim whose lease still runs (docs/api.md).
#include "postgres.hpp"  // first: PostgreSQL headers need postgres.h before them

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

#include <string>

#include "../core/error.hpp"
#include "citus.hpp"
#include "claims.hpp"
#include "guard.hpp"
#include "lock_tags.hpp"
#include "policy.hpp"
#include "probe.hpp"
#include "spi.hpp"
#include "stats.hpp"
#include "store.hpp"
#include "text.hpp"

using namespace idem;

namespace {

// Deletes the version the probe saw, and only if no transaction holds it
// now (a late worker's transition, which takes no key lock): a record that
// changed or is locked meanwhile is left alone, never waited for.
const pg::StoreStatement delete_record = {
    "DELETE FROM @store@ r WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
    "SELECT s.ctid FROM @store@ s WHERE s.namespace OPERATOR(pg_catalog.=) $1"
    " AND s.key_value OPERATOR(pg_catalog.=) $2 AND s.status OPERATOR(pg_catalog.=) $3"
    " AND s.updated_at OPERATOR(pg_catalog.=) $4 FOR UPDATE SKIP LOCKED))",
    4,
    {TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID}};

// Raises 55006 for a key that a transaction holds: who holds it, and why
// the release waits for it rather than taking the key from under it.
// own: this transaction holds it.
[[noreturn]] void in_use(const text* ns, const char* label, bool own) {
  throw core::Error(core::sqlstate::object_in_use,
                    std::string("cannot release idempotency key ") + label + ": a transaction holds it",
                    std::string(own ? "This" : "Another") + " transaction holds the key in namespace \"" +
                        pg::string_of(ns) +
                        "\" and has not ended: releasing it now could let a retry begin a second attempt beside "
                        "the first.",
                    own ? "End this transaction first (finishing its attempt with idem_commit, idem_fail_permanent "
                          "or idem_fail_transient if it is open); release the key after that."
                        : "Let that transaction end (idem_key_state names its backend), then release the key.");
}

}  // namespace

// idem_release_key(namespace, key): deletes the key's record and returns
// the status it had (NULL: the key had none). Takes the key's lock first,
// without waiting, and keeps it to the end of the transaction, so no begin
// claims the key while the release is undecided; refuses (55006) a key
// another transaction holds, this transaction's own claim, and an
// in_progress record whose lease runs. Counted (released_keys) and logged
// with the roles that did it. Granted to no one but the extension's owner.
static Datum idem_release_key_common(FunctionCallInfo fcinfo);

// 1.0.0 declares it with a new symbol: an older library computes the key's
// lock tag with another secret, so a session still running one is refused
// after the update.
IDEM_FUNCTION(idem_release_key_1_0) { return idem_release_key_common(fcinfo); }
IDEM_FUNCTION(idem_release_key) { return idem_release_key_common(fcinfo); }
static Datum idem_release_key_common(FunctionCallInfo fcinfo) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  (void)pg::authorize(ns);  // the grant, before the namespace's lock tag is taken
  pg::require_read_write(given_key, "idem_release_key", "release");
  // As a begin: registry changes of the namespace wait, and its policy is
  // read under the lock.
  pg::lock_namespace(ns, ShareLock);
  const pg::Policy policy = pg::authorize(ns);
  pg::refuse_a_key_elsewhere(fcinfo, ns, policy.store, "idem_release_key cannot release a key of",
                             "Delete the record on that node while no transaction holds the key (docs/scale-out.md).");
  text* key = pg::stored_key(given_key, policy);
  char label[32];
  pg::key_label(given_key, label);
  if (pg::held_claim(ns, key) != nullptr) in_use(ns, label, true);
  LOCKTAG lock;
  if (!pg::try_lock_key(ns, key, &lock)) in_use(ns, label, false);
  const pg::Store store =
      pg::open_store(ns, policy.store, RowExclusiveLock, pg::Call{key, policy.hash_keys, "release_key"});
  const pg::Probe p = pg::probe_key(store, ns, key, given_key);
  if (p.found == pg::Found::busy) in_use(ns, label, false);
  if (p.found == pg::Found::nothing) PG_RETURN_NULL();
  // This transaction's own record (a claim, or an attempt it finished):
  // released, a begin later in the transaction would answer fresh again.
  if (p.own) in_use(ns, label, true);
  // An in_progress record is released only when a begin would take it over.
  const TimestampTz until = p.status == 'i' ? pg::takeover_from(p, policy) : DT_NOBEGIN;
  if (GetCurrentTimestamp() < until)
    throw core::Error(core::sqlstate::object_in_use,
                      std::string("cannot release idempotency key ") + label + ": its claim may still be worked on",
                      "The key's in_progress record in namespace \"" + pg::string_of(ns) + "\" " +
                          (policy.lease_us > 0 ? "was claimed under an in_progress_lease" : "has no lease") +
                          ": until " + timestamptz_to_str(until) +
                          " its holder may still be working, and a retry answers in_flight.",
                      "Release the key after that, or let a retry take it over then.");
  const char* status = p.status == 'c' ? "committed" : p.status == 'f' ? "failed" : "in_progress";
  const Datum values[4] = {PointerGetDatum(ns), PointerGetDatum(key), CStringGetTextDatum(status),
                           TimestampTzGetDatum(p.updated_at)};
  if (pg::execute(delete_record, store, values, "    ") == 0)
    throw core::Error(core::sqlstate::object_in_use,
                      std::string("cannot release idempotency key ") + label + ": its record was not deleted",
                      "Between the look and the delete, another transaction changed or locked the key's record in "
                      "namespace \"" + pg::string_of(ns) +
                          "\" (a late transition of its claim) or deleted it (a purge), or a trigger, rule or row "
                          "security policy of its store kept the delete from it.",
                      "Look at the key again (idem_key_state) and release it if it still needs it.");
  pg::count(pg::released_keys);
  pg::count_in(ns, pg::ns_released_keys);
  // Logged when released, as the counters count: a rollback undoes the
  // release, not the line. Without the statement or the context (a
  // PL/pgSQL caller's line), which name the key.
  ereport(LOG, (errmsg("idempotency: key %s of namespace \"%s\" released by role \"%s\" (session role \"%s\"), "
                       "effective if its transaction commits; its record was %s",
                       label, text_to_cstring(ns), GetUserNameFromId(GetUserId(), false),
                       GetUserNameFromId(GetSessionUserId(), false), status),
                errhidestmt(true), errhidecontext(true)));
  PG_RETURN_TEXT_P(cstring_to_text(status));
}
