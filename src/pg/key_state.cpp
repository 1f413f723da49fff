// key_state.cpp: idem_key_state(namespace, key), what an operator sees of
// one key: its record, or the claim that a transaction holds by the key's
// lock alone, which no row shows (docs/operations.md, "Claims held by a
// lock").
#include "postgres.hpp"  // first: PostgreSQL headers need postgres.h before them

extern "C" {
#include "access/htup_details.h"
#include "funcapi.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

#include "../core/error.hpp"
#include "citus.hpp"
#include "claims.hpp"
#include "guard.hpp"
#include "lock_tags.hpp"
#include "policy.hpp"
#include "probe.hpp"
#include "store.hpp"
#include "text.hpp"

using namespace idem;

namespace {

enum Field { f_state, f_holder_pid, f_attempt, f_claimed_at, f_expires_at, f_request_hash, field_count };

// One row of the result, every column NULL but the state.
struct Row {
  Datum values[field_count] = {};
  bool nulls[field_count] = {true, true, true, true, true, true};
  explicit Row(const char* state) { values[f_state] = CStringGetTextDatum(state), nulls[f_state] = false; }
  void set(Field f, Datum d) { values[f] = d, nulls[f] = false; }
};

// The holder's backend; 0 (a prepared transaction, or one that has ended)
// leaves it NULL.
void set_pid(Row& row, int pid) {
  if (pid != 0) row.set(f_holder_pid, Int32GetDatum(pid));
}

// The state of a key, from the lock table and then the look a begin takes
// (the primary key with a dirty snapshot), in this order of precedence: a
// row another transaction is writing ('in_flight'), a row ('in_progress',
// 'committed', 'failed'), a claim held by the key's lock alone ('held',
// also this transaction's own), or nothing ('absent'). The lock table is
// read first: a holder that finishes meanwhile has written its row before
// it lets the lock go, so the look that follows finds it, and a key is
// never 'absent' on its way from held to committed.
Row state_of(const text* ns, const text* key, const text* given_key, const pg::Policy& policy) {
  if (const pg::HeldClaim* own = pg::held_claim(ns, key)) {
    Row row("held");
    set_pid(row, MyProcPid);
    row.set(f_attempt, Int32GetDatum(1));
    row.set(f_claimed_at, TimestampTzGetDatum(own->claimed_at));
    row.set(f_expires_at, TimestampTzGetDatum(own->expires_at));
    row.set(f_request_hash, PointerGetDatum(own->request_hash));
    return row;
  }
  int lock_pid;
  const bool locked = pg::key_lock_holder(ns, key, &lock_pid);
  const pg::Store store =
      pg::open_store(ns, policy.store, AccessShareLock, pg::Call{key, policy.hash_keys, "key_state"});
  const pg::Probe p = pg::probe_key(store, ns, key, given_key, false);
  if (p.found == pg::Found::busy) {
    Row row("in_flight");
    set_pid(row, pg::backend_of(p.busy_xid));
    return row;
  }
  if (p.found == pg::Found::row) {
    Row row(p.status == 'i' ? "in_progress" : p.status == 'c' ? "committed" : "failed");
    row.set(f_attempt, Int32GetDatum(p.attempt));
    row.set(f_claimed_at, TimestampTzGetDatum(p.updated_at));
    row.set(f_expires_at, TimestampTzGetDatum(p.expires_at));
    row.set(f_request_hash, p.request_hash);
    return row;
  }
  if (!locked) return Row("absent");
  Row row("held");
  set_pid(row, lock_pid);
  return row;
}

}  // namespace

// idem_key_state(namespace, key): the key's state, the backend holding it,
// its attempt, when it was claimed, when its replay window ends and its
// request hash. The install script grants it to no one but the extension's
// owner: it names the backends working on a key. A store Citus distributes
// is refused: its rows and locks are on the node of the key's shard.
static Datum idem_key_state_common(FunctionCallInfo fcinfo);

// 1.0.0 declares it with a new symbol: an older library computes the key's
// lock tag with another secret, so a session still running one is refused
// after the update.
IDEM_FUNCTION(idem_key_state_1_0) { return idem_key_state_common(fcinfo); }
IDEM_FUNCTION(idem_key_state) { return idem_key_state_common(fcinfo); }
static Datum idem_key_state_common(FunctionCallInfo fcinfo) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  const pg::Policy policy = pg::authorize(ns);
  pg::refuse_a_key_elsewhere(fcinfo, ns, policy.store, "idem_key_state cannot look at",
                             "On that node, look at the shard's row and at pg_locks (docs/scale-out.md).");
  const Row row = state_of(ns, pg::stored_key(given_key, policy), given_key, policy);
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    throw core::Error(core::sqlstate::feature_not_supported, "idem_key_state must return a record");
  desc = BlessTupleDesc(desc);
  PG_RETURN_DATUM(
      HeapTupleGetDatum(heap_form_tuple(desc, const_cast<Datum*>(row.values), const_cast<bool*>(row.nulls))));
}
