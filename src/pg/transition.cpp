// transition.cpp: the transitions of an in-progress record: idem_commit and
// idem_fail_permanent (kept for replay), idem_fail_transient (forgotten, so
// the next begin is fresh), and the two that are not terminal,
// idem_extend_lease (a holder's heartbeat) and idem_save_point (a heartbeat
// that also records how far the work got). Each checks its arguments and
// the caller's grant, opens the store and asks its backend (backend.hpp);
// when nothing matched, it says why.
#include "postgres.hpp"  // first: PostgreSQL headers need postgres.h before them

#include <cstring>
#include <string>

extern "C" {
#include "access/xact.h"
}

#include "../core/error.hpp"
#include "../core/fence.hpp"
#include "backend.hpp"
#include "canonical.hpp"
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
#include "write.hpp"

using namespace idem;

namespace {

// Raises 55000 for idem_fail_transient on a record whose work may have had
// effects: taken over (attempt > 1), or with recovery point point (NULL: none).
[[noreturn]] void refuse_forgetting(const text* given_key, int32 attempt, const char* point) {
  char label[32];
  pg::key_label(given_key, label);
  if (point != nullptr)
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string("cannot forget idempotency key ") + label + ": it has a recovery point",
                      std::string("Its holder recorded the recovery point \"") + point +
                          "\": the work has had effects that a retry must resume after, and forgetting the record "
                          "would lose them (the retry would start over).",
                      "Roll back instead and leave the claim to its lease: a retry takes it over and resumes from "
                      "the point. Or finish it with idem_commit or idem_fail_permanent.");
  throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                    std::string("cannot forget idempotency key ") + label + ": it was taken over",
                    "The record is at attempt " + std::to_string(attempt) +
                        ": an earlier attempt's lease ran out and a begin took the claim over, and that attempt may "
                        "have acted before it stopped (its outcome is unknown). Forgetting the record would let a "
                        "retry start over, or another request take the key.",
                    "Roll back instead and leave the claim to its lease, or finish it with idem_commit or "
                    "idem_fail_permanent once you know what the earlier attempt did.");
}

// Why nothing matched: the record as the transaction's snapshot sees it,
// and as the latest snapshot does (they differ when another transaction
// changed it after a REPEATABLE READ or SERIALIZABLE snapshot was taken).
#define SELECT_RECORD(COLUMN)                                                     \
  "SELECT " COLUMN " FROM @store@"                                                \
  " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2"
const pg::StoreStatement current_status = {SELECT_RECORD("status"), 2, {TEXTOID, TEXTOID}};
const pg::StoreStatement latest_status = {SELECT_RECORD("status"), 2, {TEXTOID, TEXTOID}, true};
const pg::StoreStatement current_attempt = {SELECT_RECORD("attempt"), 2, {TEXTOID, TEXTOID}};

// The fence argument (argno), what a transition was given to prove the
// record is still its caller's; NULL (or none): this transaction's claim.
pg::Claim proof_arg(FunctionCallInfo fcinfo, int argno) {
  if (PG_NARGS() <= argno || PG_ARGISNULL(argno)) return {pg::Claim::none, 0};
  const int64 value = PG_GETARG_INT64(argno);
  if (value < core::first_fence)
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency fence",
                      "fence is the value idem_begin answered with fresh (its fence column), or NULL, not " +
                          std::to_string(value) + ".",
                      value >= 1 ? "An attempt number is not a fence; pass the outcome's fence." : "");
  return {pg::Claim::fence, value};
}

// Whether another transaction holds the key's lock: a claim without a row
// (a namespace without a lease), or a begin between its probe and insert.
bool held_elsewhere(const text* ns, const text* key) {
  LOCKTAG tag;
  if (!pg::try_lock_key(ns, key, &tag)) return true;
  pg::unlock_key(tag);
  return false;
}

// Raises 55000 for a transition whose fence is not that of the claim in
// progress under attempt holder.
[[noreturn]] void wrong_proof(const char* action, const char* label, int32 holder) {
  throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                    std::string("cannot ") + action + " an idempotency record held under another fence",
                    "The record for key " + std::string(label) + " is in progress under attempt " +
                        std::to_string(holder) +
                        (holder > 1 ? " (taken over " + std::to_string(holder - 1) + " time" + (holder > 2 ? "s" : "") +
                                          ")"
                                    : std::string()) +
                        ", with a fence other than the one given: the claim that drew that fence is over (its lease "
                        "ran out and a later begin took the record over, or the record was forgotten or purged and "
                        "begun again), or it is another key's, or another copy of the database's. Only the claim "
                        "holding the record may finish it.",
                    "Pass the fence that idem_begin answered with fresh for this key.");
}

// Called when no in_progress row matched: says why, with SQLSTATE 55000, or
// 40001 when the record changed after the transaction's snapshot. Every
// PostgreSQL call comes first; strings are built only to throw. given_key is
// the caller's key, named in the message only by key_label.
[[noreturn]] void not_in_progress(const pg::Store& store, text* ns, text* key, const text* given_key,
                                  const char* action, pg::Claim proof) {
  char label[32];
  pg::key_label(given_key, label);
  const Datum values[2] = {PointerGetDatum(ns), PointerGetDatum(key)};
  Datum status;
  bool none = true;
  pg::execute(current_status, store, values, "  ", &status, &none);
  const text* status_text = none ? nullptr : DatumGetTextPP(status);
  if (IsolationUsesXactSnapshot()) {
    Datum latest;
    bool latest_none = true;
    pg::execute(latest_status, store, values, "  ", &latest, &latest_none);
    if (latest_none != none || (!none && !pg::same_bytes(status_text, DatumGetTextPP(latest))))
      pg::concurrent_change(given_key);
  }
  if (none && (pg::probe_key(store, ns, key, given_key).found == pg::Found::busy || held_elsewhere(ns, key)))
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string("cannot ") + action + " idempotency key " + label +
                          ": this transaction holds no claim on it",
                      "Another transaction began the key in namespace \"" + pg::string_of(ns) +
                          "\" and has not ended (idem_begin answered in_flight here). Only the transaction whose "
                          "idem_begin answered fresh may finish it.");
  if (none)
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string("cannot ") + action + " an idempotency record that is not in progress",
                      "No record exists for key " + std::string(label) + " in namespace \"" + pg::string_of(ns) +
                          "\"; idem_begin must answer fresh first.");
  if (pg::string_of(status_text) == "in_progress" && pg::claimed_here(store, ns, key, proof))
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string("cannot ") + action + " idempotency key " + label + ": its store skipped the change",
                      "The record of the key in namespace \"" + pg::string_of(ns) +
                          "\" is this claim's and in progress, but the store's statement changed no row: a BEFORE "
                          "trigger on the table returned NULL, or a rule or row security policy of its owner's left "
                          "the row out.",
                      "A store's BEFORE UPDATE and BEFORE DELETE triggers must return the row (NEW, or OLD) for the "
                      "store's own changes.");
  if (proof.kind != pg::Claim::none && pg::string_of(status_text) == "in_progress") {
    // Fences say nothing by their order (they are random): only the attempt
    // number tells whether the record was taken over since it was claimed.
    Datum holder_attempt;
    bool unknown = true;
    pg::execute(current_attempt, store, values, "  ", &holder_attempt, &unknown);
    wrong_proof(action, label, unknown ? 0 : DatumGetInt32(holder_attempt));
  }
  if (proof.kind == pg::Claim::none && pg::string_of(status_text) == "in_progress")
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string("cannot ") + action + " an idempotency record another transaction claimed",
                      "The record for key " + std::string(label) + " in namespace \"" + pg::string_of(ns) +
                          "\" is in progress, claimed by another transaction that committed its claim (a namespace "
                          "with an in_progress_lease lets a claim outlive its transaction). Without a fence, a "
                          "transition acts only on a claim of its own transaction.",
                      "The claim's holder finishes it with the fence idem_begin answered with fresh.");
  throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                    std::string("cannot ") + action + " an idempotency record that is not in progress",
                    "The record for key " + std::string(label) + " is already " + pg::string_of(status_text) +
                        "; committed and failed records are final.");
}

// Whether proof names the claim this transaction holds by the key's lock
// alone (drawn with its fence); raises 55000 as a transition with another
// claim's fence does when it does not.
void check_held_proof(const pg::HeldClaim& held, const pg::Claim& proof, const text* given_key,
                      const char* action) {
  if (proof.kind == pg::Claim::none || proof.value == held.fence) return;
  char label[32];
  pg::key_label(given_key, label);
  wrong_proof(action, label, 1);
}

// A claim held by its lock alone is written to the extension's own table,
// where it was claimed; raises 55000 when this transaction bound the
// namespace to another store since (the claim stays open, so COMMIT is
// refused and nothing of the attempt is kept). An index, trigger or
// constraint an operator added to that table meanwhile is no change of
// store: its backend is then the SQL one, which writes the record as well.
void refuse_moved_claim(const pg::Store& store, const text* ns, const text* given_key, const char* action) {
  if (store.own) return;
  char label[32];
  pg::key_label(given_key, label);
  throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                    std::string("cannot ") + action + " idempotency key " + label +
                        ": its namespace was bound to another store after it was claimed",
                    "This transaction's idem_begin claimed the key in namespace \"" + pg::string_of(ns) +
                        "\" in the extension's table, and then bound the namespace to another store.",
                    "Bind the namespace before beginning its keys, or in another transaction.");
}

[[noreturn]] void invalid_error_payload(const std::string& what) {
  throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency error payload",
                    what +
                        " An error payload is a JSON object with string \"class_tag\" and \"message\" and an "
                        "optional string \"cause\", and no other keys.");
}

bool key_is(const JsonbValue& key, const char* name) {
  return static_cast<size_t>(key.val.string.len) == std::strlen(name) &&
         std::memcmp(key.val.string.val, name, key.val.string.len) == 0;
}

// The specification's StoredAppError: an object with string "class_tag", string
// "message" and an optional string "cause", nothing else. No std::string
// lives across the iterator calls (they may raise): strings are built only
// inside the throw.
void check_error_payload(Jsonb* error) {
  if (!JB_ROOT_IS_OBJECT(error) || JB_ROOT_IS_SCALAR(error)) invalid_error_payload("It is not an object.");
  bool has_class_tag = false, has_message = false;
  JsonbIterator* it = JsonbIteratorInit(&error->root);
  JsonbValue k, v;
  JsonbIteratorNext(&it, &k, true);  // WJB_BEGIN_OBJECT
  while (JsonbIteratorNext(&it, &k, true) == WJB_KEY) {
    JsonbIteratorNext(&it, &v, true);
    if (key_is(k, "class_tag"))
      has_class_tag = true;
    else if (key_is(k, "message"))
      has_message = true;
    else if (!key_is(k, "cause")) {
      // At most 64 bytes of the key, cut between characters.
      const int shown = pg_mbcliplen(k.val.string.val, k.val.string.len, 64);
      invalid_error_payload("Key \"" + std::string(k.val.string.val, shown) + "\" is not allowed.");
    }
    if (v.type != jbvString)
      invalid_error_payload("\"" + std::string(k.val.string.val, k.val.string.len) + "\" is not a string.");
  }
  if (!has_class_tag) invalid_error_payload("\"class_tag\" is missing.");
  if (!has_message) invalid_error_payload("\"message\" is missing.");
}

// Moves the caller's in_progress record to committed (with the result) or
// failed (with the error payload).
void finish(FunctionCallInfo fcinfo, bool committing) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  const char* action = committing ? "commit" : "fail";
  Jsonb* payload = pg::payload_arg(fcinfo, 2, committing ? "result" : "error");
  const pg::Claim proof = proof_arg(fcinfo, 3);
  const pg::Policy policy = pg::authorize(ns);
  pg::refuse_where_citus_would_split_the_store(fcinfo, pg::citus_distributes(policy.store));
  pg::check_payload_size(payload, committing ? "result" : "error", ns, policy);
  pg::check_utf8(&payload->root);
  if (!committing) check_error_payload(payload);
  pg::require_read_write(given_key, committing ? "idem_commit" : "idem_fail_permanent", action);
  text* key = pg::stored_key(given_key, policy);
  const pg::Store store = pg::open_store(ns, policy.store, RowExclusiveLock,
                                         pg::Call{key, policy.hash_keys, committing ? "commit" : "fail_permanent"});
  if (const pg::HeldClaim* held = pg::held_claim(ns, key)) {  // no row yet: its one write
    check_held_proof(*held, proof, given_key, action);
    refuse_moved_claim(store, ns, given_key, action);
    store.backend->insert_finished(store, ns, key, *held, committing, payload, policy.store_request);
  } else if (!store.backend->finish(store, ns, key, proof, committing, payload)) {
    not_in_progress(store, ns, key, given_key, action, proof);
  }
  pg::finish(ns, key);
  pg::count(committing ? pg::commits : pg::permanent_failures);
  pg::count_in(ns, committing ? pg::ns_commits : pg::ns_permanent_failures);
}

// Deletes the caller's in_progress record so the next begin is fresh; never
// a committed or failed one, nor one whose work may have had effects.
void forget(FunctionCallInfo fcinfo) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  const pg::Claim proof = proof_arg(fcinfo, 2);
  const pg::Policy policy = pg::authorize(ns);
  pg::refuse_where_citus_would_split_the_store(fcinfo, pg::citus_distributes(policy.store));
  pg::require_read_write(given_key, "idem_fail_transient", "fail");
  text* key = pg::stored_key(given_key, policy);
  const pg::Store store =
      pg::open_store(ns, policy.store, RowExclusiveLock, pg::Call{key, policy.hash_keys, "fail_transient"});
  if (const pg::HeldClaim* held = pg::held_claim(ns, key)) {  // nothing written: nothing to forget
    check_held_proof(*held, proof, given_key, "fail");
    refuse_moved_claim(store, ns, given_key, "fail");
  } else {
    const pg::Forgot forgot = store.backend->forget(store, ns, key, proof);
    if (forgot.result == pg::Forgot::kept) refuse_forgetting(given_key, forgot.attempt, forgot.point);
    if (forgot.result == pg::Forgot::nothing) not_in_progress(store, ns, key, given_key, "fail", proof);
  }
  pg::finish(ns, key);
  pg::count(pg::transient_failures);
  pg::count_in(ns, pg::ns_transient_failures);
}

// A recovery point's name (argno): not NULL, 1 to 255 characters, no
// control characters, as a key is (it is shown to operators and logs).
text* point_arg(FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno))
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency recovery point must not be null",
                      "Name the phase the work has completed, such as 'charged'.");
  text* point = PG_GETARG_TEXT_PP(argno);
  const char* bytes = VARDATA_ANY(point);
  const int length = VARSIZE_ANY_EXHDR(point);
  bool control = false;
  for (int i = 0; i < length; ++i)
    control = control || static_cast<unsigned char>(bytes[i]) < 0x20 || bytes[i] == 0x7f;
  const int characters = pg_mbstrlen_with_len(bytes, length);
  if (characters == 0 || characters > 255 || control)
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency recovery point",
                      "A recovery point is 1 to 255 characters with no control characters; the one given has " +
                          std::to_string(characters) + " characters" + (control ? ", some of them control" : "") +
                          ".");
  return point;
}

// Where a heartbeat's arguments are: idem_extend_lease(namespace, key,
// fence), 0.9's idem_record_point(namespace, key, fence, point, state), and
// 1.0's idem_save_point(namespace, key, point, state, fence), which puts the
// fence last as every other call does. point < 0: a heartbeat alone.
struct Heartbeat {
  const char* function;
  const char* entry_point;  // the Citus entry point's suffix (<table>_save_point)
  int fence, point, state;
};
constexpr Heartbeat extend_lease_args{"idem_extend_lease", "extend_lease", 2, -1, -1};
constexpr Heartbeat record_point_args{"idem_record_point", "record_point", 2, 3, 4};
constexpr Heartbeat save_point_args{"idem_save_point", "save_point", 4, 2, 3};

// Raises 55000 unless the namespace has a lease: without one a claim is
// held by its transaction and ends with it.
void require_lease(const text* ns, const pg::Policy& policy, bool recording) {
  if (policy.lease_us > 0) return;
  throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                    "idempotency namespace \"" + pg::string_of(ns) + "\" has no in_progress_lease",
                    recording ? "Without a lease a claim is held by its transaction and ends with it: a retry "
                                "never resumes it, so it has no recovery points."
                              : "Without a lease a claim is held by its transaction and ends with it: there is no "
                                "lease to extend.",
                    "Give the namespace one with idem_namespace_configure(namespace, in_progress_lease => ...).");
}

// Moves the lease of the caller's claim on: the in_progress record keeps its
// fence and attempt, and its lease runs again from now. With a point, it
// records the recovery point and its state (NULL for none) too. Returns the
// new end of the lease.
TimestampTz extend(FunctionCallInfo fcinfo, const Heartbeat& args) {
  const bool recording = args.point >= 0;
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  if (PG_ARGISNULL(args.fence))
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency fence must not be null",
                      std::string(args.function) + " acts for the claim that drew the fence: pass the fence "
                      "idem_begin answered with fresh.");
  const pg::Claim proof = proof_arg(fcinfo, args.fence);
  text* point = recording ? point_arg(fcinfo, args.point) : nullptr;
  Jsonb* state = recording && !PG_ARGISNULL(args.state) ? PG_GETARG_JSONB_P(args.state) : nullptr;
  const pg::Policy policy = pg::authorize(ns);
  // On a store Citus distributes, only on the node of the key's shard (its
  // entry point, <table>_extend_lease or <table>_save_point: open_store).
  pg::refuse_where_citus_would_split_the_store(fcinfo, pg::citus_distributes(policy.store));
  if (state != nullptr) {
    pg::check_payload_size(state, "recovery state", ns, policy);
    pg::check_utf8(&state->root);
  }
  const char* action = recording ? "record a recovery point of" : "extend the lease of";
  pg::require_read_write(given_key, args.function, action);
  require_lease(ns, policy, recording);
  text* key = pg::stored_key(given_key, policy);
  const pg::Store store =
      pg::open_store(ns, policy.store, RowExclusiveLock, pg::Call{key, policy.hash_keys, args.entry_point});
  if (pg::held_claim(ns, key) != nullptr) {  // made before the namespace had a lease
    char label[32];
    pg::key_label(given_key, label);
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string("cannot ") + action + " idempotency key " + label + ": this transaction holds it by "
                      "its lock",
                      "The claim was made before namespace \"" + pg::string_of(ns) +
                          "\" had a lease: it is held by this transaction and ends with it.");
  }
  const TimestampTz claimed_at = pg::extend_claim(store, ns, key, proof.value, point, state);
  if (claimed_at == 0) not_in_progress(store, ns, key, given_key, action, proof);
  if (recording) pg::count(pg::recovery_points), pg::count_in(ns, pg::ns_recovery_points);
  return claimed_at + policy.lease_us;
}

}  // namespace

// A holder's heartbeat (0.7.0): its claim under a lease is not taken over
// while it keeps calling this within the lease.
IDEM_FUNCTION(idem_extend_lease_1_0) { PG_RETURN_TIMESTAMPTZ(extend(fcinfo, extend_lease_args)); }

// A holder's recovery point (1.0.0; 0.8.0's idem_record_point, with the
// fence last): how far its work got, which a begin that takes the claim
// over answers, and a heartbeat too.
IDEM_FUNCTION(idem_save_point) { PG_RETURN_TIMESTAMPTZ(extend(fcinfo, save_point_args)); }
IDEM_FUNCTION(idem_record_point_1_0) { PG_RETURN_TIMESTAMPTZ(extend(fcinfo, record_point_args)); }

// Records the result of the caller's in-progress operation; every later
// begin with the same request replays it (prior_result). The symbol 0.5.0
// gave it, with the fence argument.
IDEM_FUNCTION(idem_commit_1_0) {
  finish(fcinfo, true);
  PG_RETURN_VOID();
}

// Records a permanent error; every later begin with the same request
// replays it (prior_error).
IDEM_FUNCTION(idem_fail_permanent_1_0) {
  finish(fcinfo, false);
  PG_RETURN_VOID();
}

// Forgets the in-progress operation so that the next begin is fresh, but
// not a record whose work may have had effects (taken over, or with a
// recovery point): 0.8.0's symbol, which no older library has.
IDEM_FUNCTION(idem_fail_transient_1_0) {
  forget(fcinfo);
  PG_RETURN_VOID();
}

// The symbols 0.9's scripts name, for a schema not yet updated (1.0.0's
// names are new: they read idem_defaults, which no older library does).
IDEM_FUNCTION(idem_extend_lease) { return idem_extend_lease_1_0_body(fcinfo); }
IDEM_FUNCTION(idem_record_point) { return idem_record_point_1_0_body(fcinfo); }
IDEM_FUNCTION(idem_commit_0_5) { return idem_commit_1_0_body(fcinfo); }
IDEM_FUNCTION(idem_fail_permanent_0_5) { return idem_fail_permanent_1_0_body(fcinfo); }
IDEM_FUNCTION(idem_fail_transient_0_8) { return idem_fail_transient_1_0_body(fcinfo); }
