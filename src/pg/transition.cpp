// transition.cpp: the terminal transitions of an in-progress record:
// idem_commit, idem_fail_permanent (both kept for replay) and
// idem_fail_transient (forgotten, so the next begin is fresh); and the two
// that are not terminal: idem_extend_lease (a holder's heartbeat) and
// idem_record_point (a heartbeat that also records how far the work got).
#include "postgres.hpp"  // first: PostgreSQL headers need postgres.h before them

#include <algorithm>
#include <cstring>
#include <string>

extern "C" {
#include "access/xact.h"
}

#include "../core/error.hpp"
#include "../core/fence.hpp"
#include "canonical.hpp"
#include "citus.hpp"
#include "claims.hpp"
#include "guard.hpp"
#include "lock_tags.hpp"
#include "policy.hpp"
#include "probe.hpp"
#include "store.hpp"
#include "spi.hpp"
#include "stats.hpp"
#include "text.hpp"
#include "write.hpp"

using namespace idem;

namespace {

// The unfenced statements serve 0.3.0's schema too, which has no attempt
// column; the fenced ones add one condition to the same SQL. A finished
// record's updated_at is the clock when it was finished.
#define FINISH_IN_PROGRESS                                                                    \
  "UPDATE @store@"                                                                          \
  " SET status = $3, result_payload = $4, error_payload = $5,"                               \
  " updated_at = pg_catalog.clock_timestamp()"                                               \
  " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2"      \
  " AND status OPERATOR(pg_catalog.=) 'in_progress'"
#define FORGET_IN_PROGRESS                                                           \
  "DELETE FROM @store@"                                                            \
  " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2" \
  " AND status OPERATOR(pg_catalog.=) 'in_progress'"
#define SELECT_RECORD(COLUMN)                                                     \
  "SELECT " COLUMN " FROM @store@"                                                \
  " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2"

const pg::StoreStatement finish_in_progress = {FINISH_IN_PROGRESS, 5, {TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID}};
const pg::StoreStatement forget_in_progress = {FORGET_IN_PROGRESS, 2, {TEXTOID, TEXTOID}};

// Fenced by the attempt number (0.4's transitions): only while the record
// is still at that attempt.
const pg::StoreStatement finish_attempt = {FINISH_IN_PROGRESS " AND attempt OPERATOR(pg_catalog.=) $6", 6,
                                           {TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, INT4OID}};
const pg::StoreStatement forget_attempt = {FORGET_IN_PROGRESS " AND attempt OPERATOR(pg_catalog.=) $3", 3,
                                           {TEXTOID, TEXTOID, INT4OID}};

// Fenced by the fence (0.5): only while the record is still the claim that
// drew it. Fences are random (core/fence.hpp), so neither a takeover, nor a
// record begun again after it was forgotten or purged, nor a claim made in
// a copy of the database can be finished with another claim's fence.
const pg::StoreStatement finish_fence = {FINISH_IN_PROGRESS " AND fence OPERATOR(pg_catalog.=) $6", 6,
                                         {TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, INT8OID}};
const pg::StoreStatement forget_fence = {FORGET_IN_PROGRESS " AND fence OPERATOR(pg_catalog.=) $3", 3,
                                         {TEXTOID, TEXTOID, INT8OID}};

// A heartbeat of a claim under a lease: its lease runs again from the
// clock, only while the record is still the claim that drew the fence. Its
// replay window moves with it (the claim's window, expires_at less
// updated_at, from now): a record finished after its window had passed
// would be purged at once, and its retry answered fresh.
#define EXTEND_FENCE(SET_POINT)                                                                             \
  "UPDATE @store@ SET updated_at = pg_catalog.clock_timestamp()," SET_POINT                                  \
  " expires_at = GREATEST(expires_at,"                                                                       \
  " pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) (expires_at OPERATOR(pg_catalog.-) updated_at))"     \
  " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2"                       \
  " AND status OPERATOR(pg_catalog.=) 'in_progress' AND fence OPERATOR(pg_catalog.=) $3"                     \
  " RETURNING updated_at"

const pg::StoreStatement extend_fence = {EXTEND_FENCE(""), 3, {TEXTOID, TEXTOID, INT8OID}};

// A recovery point: the heartbeat, recording the phase ($4) and its state
// ($5) that a takeover of the claim answers.
const pg::StoreStatement record_point_fence = {EXTEND_FENCE(" recovery_point = $4, recovery_state = $5,"), 5,
                                               {TEXTOID, TEXTOID, INT8OID, TEXTOID, JSONBOID}};

// Forgetting a record whose work may have had effects is refused: one
// taken over (an earlier attempt may have acted before its lease ran out)
// or, in a store with the recovery columns, one with a recovery point (its
// holder said it did). A retry that started over would repeat the effects.
#define UNSETTLED " AND attempt OPERATOR(pg_catalog.=) 1"
#define UNSETTLED_NO_POINT UNSETTLED " AND recovery_point IS NULL"
#define BY_ATTEMPT " AND attempt OPERATOR(pg_catalog.=) $3"
#define BY_FENCE " AND fence OPERATOR(pg_catalog.=) $3"
const pg::StoreStatement forget_first_in_progress = {FORGET_IN_PROGRESS UNSETTLED, 2, {TEXTOID, TEXTOID}};
const pg::StoreStatement forget_first_attempt = {FORGET_IN_PROGRESS UNSETTLED BY_ATTEMPT, 3, {TEXTOID, TEXTOID, INT4OID}};
const pg::StoreStatement forget_first_fence = {FORGET_IN_PROGRESS UNSETTLED BY_FENCE, 3, {TEXTOID, TEXTOID, INT8OID}};
const pg::StoreStatement forget_pointless_in_progress = {FORGET_IN_PROGRESS UNSETTLED_NO_POINT, 2, {TEXTOID, TEXTOID}};
const pg::StoreStatement forget_pointless_attempt = {FORGET_IN_PROGRESS UNSETTLED_NO_POINT BY_ATTEMPT, 3,
                                                     {TEXTOID, TEXTOID, INT4OID}};
const pg::StoreStatement forget_pointless_fence = {FORGET_IN_PROGRESS UNSETTLED_NO_POINT BY_FENCE, 3,
                                                   {TEXTOID, TEXTOID, INT8OID}};
// Why forgetting matched nothing: the attempt and recovery point of the
// in_progress record the proof names.
#define WHY_KEPT(POINT) SELECT_RECORD("attempt, " POINT) " AND status OPERATOR(pg_catalog.=) 'in_progress'"
const pg::StoreStatement kept_in_progress = {WHY_KEPT("NULL::text"), 2, {TEXTOID, TEXTOID}};
const pg::StoreStatement kept_attempt = {WHY_KEPT("NULL::text") BY_ATTEMPT, 3, {TEXTOID, TEXTOID, INT4OID}};
const pg::StoreStatement kept_fence = {WHY_KEPT("NULL::text") BY_FENCE, 3, {TEXTOID, TEXTOID, INT8OID}};
const pg::StoreStatement kept_point_in_progress = {WHY_KEPT("recovery_point"), 2, {TEXTOID, TEXTOID}};
const pg::StoreStatement kept_point_attempt = {WHY_KEPT("recovery_point") BY_ATTEMPT, 3, {TEXTOID, TEXTOID, INT4OID}};
const pg::StoreStatement kept_point_fence = {WHY_KEPT("recovery_point") BY_FENCE, 3, {TEXTOID, TEXTOID, INT8OID}};

// Each transition's statement by the kind of proof given (pg::Claim::Kind).
const pg::StoreStatement* const finish_by[] = {&finish_in_progress, &finish_attempt, &finish_fence};
const pg::StoreStatement* const forget_by[] = {&forget_in_progress, &forget_attempt, &forget_fence};
const pg::StoreStatement* const forget_first_by[] = {&forget_first_in_progress, &forget_first_attempt,
                                                     &forget_first_fence};
const pg::StoreStatement* const forget_pointless_by[] = {&forget_pointless_in_progress, &forget_pointless_attempt,
                                                         &forget_pointless_fence};
const pg::StoreStatement* const kept_by[] = {&kept_in_progress, &kept_attempt, &kept_fence};
const pg::StoreStatement* const kept_point_by[] = {&kept_point_in_progress, &kept_point_attempt, &kept_point_fence};

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
const pg::StoreStatement current_status = {SELECT_RECORD("status"), 2, {TEXTOID, TEXTOID}};
const pg::StoreStatement latest_status = {SELECT_RECORD("status"), 2, {TEXTOID, TEXTOID}, true};
const pg::StoreStatement current_attempt = {SELECT_RECORD("attempt"), 2, {TEXTOID, TEXTOID}};

// The proof argument (argno), what a transition was given to prove the
// record is still its caller's: a fence for the 0.5 entry points, an attempt
// number for the 0.4 ones (which 0.3.0 declares without the argument).
// NULL means unfenced.
pg::Claim proof_arg(FunctionCallInfo fcinfo, int argno, bool fence) {
  if (PG_NARGS() <= argno || PG_ARGISNULL(argno)) return {pg::Claim::none, 0};
  if (fence) {
    const int64 value = PG_GETARG_INT64(argno);
    if (value < core::first_fence)
      throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency fence",
                        "fence is the value idem_begin answered with fresh (its fence column), or NULL, not " +
                            std::to_string(value) + ".",
                        value >= 1 ? "An attempt number is not a fence; pass the outcome's fence." : "");
    return {pg::Claim::fence, value};
  }
  const int32 attempt = PG_GETARG_INT32(argno);
  if (attempt < 1)
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency attempt",
                      "attempt is the positive number idem_begin answered with fresh, or NULL, not " +
                          std::to_string(attempt) + ".");
  return {pg::Claim::attempt, attempt};
}

// The proof as its statement's last parameter (int4 or int8).
Datum proof_datum(const pg::Claim& proof) {
  return proof.kind == pg::Claim::attempt ? Int32GetDatum(static_cast<int32>(proof.value)) : Int64GetDatum(proof.value);
}

// Whether another transaction holds the key's lock: a claim without a row
// (a namespace without a lease), or a begin between its probe and insert.
bool held_elsewhere(const text* ns, const text* key) {
  LOCKTAG tag;
  if (!pg::try_lock_key(ns, key, &tag)) return true;
  pg::unlock_key(tag);
  return false;
}

// Raises 55000 for a transition whose proof (a fence, or an attempt number)
// is not that of the claim in progress under attempt holder: what the
// claim holder would have to pass instead.
[[noreturn]] void wrong_proof(const char* action, const char* label, int32 holder, const pg::Claim& proof) {
  if (proof.kind == pg::Claim::fence)
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string("cannot ") + action + " an idempotency record held under another fence",
                      "The record for key " + std::string(label) + " is in progress under attempt " +
                          std::to_string(holder) +
                          (holder > 1 ? " (taken over " + std::to_string(holder - 1) + " time" +
                                            (holder > 2 ? "s" : "") + ")"
                                      : std::string()) +
                          ", with a fence other than the one given: the claim that drew that fence is over (its "
                          "lease ran out and a later begin took the record over, or the record was forgotten or "
                          "purged and begun again), or it is another key's, or another copy of the database's. "
                          "Only the claim holding the record may finish it.",
                      "Pass the fence that idem_begin answered with fresh for this key.");
  if (holder > proof.value)
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string("cannot ") + action + " an idempotency record taken over by another attempt",
                      "The record for key " + std::string(label) + " is in progress under attempt " +
                          std::to_string(holder) + ", not " + std::to_string(proof.value) +
                          ": that attempt outlived the namespace's in_progress_lease and a later begin took the "
                          "record over. Only the attempt holding the record may finish it.");
  throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                    std::string("cannot ") + action + " an idempotency record under an attempt it has not reached",
                    "The record for key " + std::string(label) + " is in progress under attempt " +
                        std::to_string(holder) + "; no begin has answered attempt " + std::to_string(proof.value) +
                        ". Pass the attempt that idem_begin answered with fresh.");
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
    wrong_proof(action, label, unknown ? 0 : DatumGetInt32(holder_attempt), proof);
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
// alone (its first attempt, drawn with its fence); raises 55000 as a
// transition with another claim's proof does when it does not.
void check_held_proof(const pg::HeldClaim& held, const pg::Claim& proof, const text* given_key,
                      const char* action) {
  if (proof.kind == pg::Claim::none || (proof.kind == pg::Claim::attempt && proof.value == 1) ||
      (proof.kind == pg::Claim::fence && proof.value == held.fence))
    return;
  char label[32];
  pg::key_label(given_key, label);
  wrong_proof(action, label, 1, proof);
}

// A claim held by its lock alone is written to the extension's own table,
// where it was claimed; raises 55000 when this transaction bound the
// namespace to another store since (the claim stays open, so COMMIT is
// refused and nothing of the attempt is kept). An index, trigger or
// constraint an operator added to that table meanwhile is no change of
// store: the record is then written through SQL (write_held).
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

// The finished record of a claim held by its lock alone (insert_finished's
// row), for the extension's table when it is not written directly: an
// operator is building an index on it (CREATE INDEX CONCURRENTLY, which
// waits for this transaction), or added a trigger, which the INSERT runs.
#define INSERT_FINISHED(MORE_COLUMNS, MORE_VALUES)                                                           \
  "INSERT INTO @store@ (namespace, key_value, status, request_hash, request_payload, result_payload,"        \
  " error_payload, created_at, updated_at, expires_at, attempt, fence" MORE_COLUMNS ")"                      \
  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, pg_catalog.clock_timestamp(), $9, 1, $10" MORE_VALUES ")"
const pg::StoreStatement insert_finished_fenced = {
    INSERT_FINISHED("", ""),
    10,
    {TEXTOID, TEXTOID, TEXTOID, BYTEAOID, JSONBOID, JSONBOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}};
const pg::StoreStatement insert_finished_recovering = {
    INSERT_FINISHED(", recovery_point, recovery_state", ", NULL, NULL"),
    10,
    {TEXTOID, TEXTOID, TEXTOID, BYTEAOID, JSONBOID, JSONBOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID}};

// Writes the finished record of a claim held by its lock alone: directly
// while the table is as installed, else through SQL.
void write_held(const pg::Store& store, text* ns, text* key, const pg::HeldClaim& held, bool committing,
                Jsonb* payload, bool keep_request) {
  if (store.direct) return pg::insert_finished(store, ns, key, held, committing, payload, keep_request);
  const Datum values[10] = {PointerGetDatum(ns),
                            PointerGetDatum(key),
                            CStringGetTextDatum(committing ? "committed" : "failed"),
                            PointerGetDatum(held.request_hash),
                            PointerGetDatum(held.request),
                            PointerGetDatum(payload),
                            PointerGetDatum(payload),
                            TimestampTzGetDatum(held.claimed_at),
                            TimestampTzGetDatum(held.expires_at),
                            Int64GetDatum(held.fence)};
  char nulls[11] = "          ";
  nulls[4] = held.request == nullptr || !keep_request ? 'n' : ' ';
  nulls[committing ? 6 : 5] = 'n';
  pg::execute(store.recovers ? insert_finished_recovering : insert_finished_fenced, store, values, nulls);
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

// The seed's StoredAppError: an object with string "class_tag", string
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

// Moves the in_progress row to committed (with the result) or failed (with
// the error payload). fence: the 0.5 entry point (a fence argument).
void finish(FunctionCallInfo fcinfo, bool committing, bool fence) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  const char* status = committing ? "committed" : "failed";
  Jsonb* payload = pg::payload_arg(fcinfo, 2, committing ? "result" : "error");
  const pg::Claim proof = proof_arg(fcinfo, 3, fence);
  const pg::Policy policy = pg::authorize(ns);
  pg::refuse_where_citus_would_split_the_store(fcinfo, pg::citus_distributes(policy.store));
  pg::check_payload_size(payload, committing ? "result" : "error", ns, policy);
  pg::check_utf8(&payload->root);
  if (!committing) check_error_payload(payload);
  pg::require_read_write(given_key, committing ? "idem_commit" : "idem_fail_permanent",
                         committing ? "commit" : "fail");
  text* key = pg::stored_key(given_key, policy);
  const Datum values[6] = {PointerGetDatum(ns),      PointerGetDatum(key),     CStringGetTextDatum(status),
                           PointerGetDatum(payload), PointerGetDatum(payload), proof_datum(proof)};
  const char* nulls = committing ? "    n " : "   n  ";
  const pg::Store store = pg::open_store(ns, policy.store, RowExclusiveLock,
                                         pg::Call{key, policy.hash_keys, committing ? "commit" : "fail_permanent"});
  if (const pg::HeldClaim* held = pg::held_claim(ns, key)) {  // no row yet: its one write
    check_held_proof(*held, proof, given_key, committing ? "commit" : "fail");
    refuse_moved_claim(store, ns, given_key, committing ? "commit" : "fail");
    write_held(store, ns, key, *held, committing, payload, policy.store_request);
    pg::finish(ns, key);
    pg::count(committing ? pg::commits : pg::permanent_failures);
    return;
  }
  const uint64 done = store.direct ? pg::finish_claim(store, ns, key, proof, committing, payload)
                      : proof.kind == pg::Claim::none && !pg::claimed_here(store, ns, key)
                          ? 0
                          : pg::execute(*finish_by[proof.kind], store, values, nulls);
  if (done == 0) not_in_progress(store, ns, key, given_key, committing ? "commit" : "fail", proof);
  pg::finish(ns, key);
  pg::count(committing ? pg::commits : pg::permanent_failures);
}

// Deletes the in-progress row so the next begin is fresh; never touches a
// committed or failed row.
void forget(FunctionCallInfo fcinfo, bool fence) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  const pg::Claim proof = proof_arg(fcinfo, 2, fence);
  const pg::Policy policy = pg::authorize(ns);
  pg::refuse_where_citus_would_split_the_store(fcinfo, pg::citus_distributes(policy.store));
  pg::require_read_write(given_key, "idem_fail_transient", "fail");
  text* key = pg::stored_key(given_key, policy);
  const Datum values[3] = {PointerGetDatum(ns), PointerGetDatum(key), proof_datum(proof)};
  const pg::Store store =
      pg::open_store(ns, policy.store, RowExclusiveLock, pg::Call{key, policy.hash_keys, "fail_transient"});
  if (const pg::HeldClaim* held = pg::held_claim(ns, key)) {  // nothing written: nothing to forget
    check_held_proof(*held, proof, given_key, "fail");
    refuse_moved_claim(store, ns, given_key, "fail");
    pg::finish(ns, key);
    pg::count(pg::transient_failures);
    return;
  }
  bool kept = false;  // the direct path found the claim taken over or with a point
  bool named = proof.kind != pg::Claim::none;  // the claim is the proof's, or this transaction's own
  uint64 done = 0;
  if (store.direct) {
    done = pg::forget_claim(store, ns, key, proof, &kept);
  } else if (named || pg::claimed_here(store, ns, key)) {
    named = true;
    const pg::StoreStatement* const* statements =
        store.recovers ? forget_pointless_by : store.fenced ? forget_first_by : forget_by;
    done = pg::execute(*statements[proof.kind], store, values, "   ");
  }
  if (done == 0 && store.fenced && (kept || named)) {
    // Matched nothing: the claim may be one whose work may have had effects.
    Datum why[2];
    bool none[2] = {true, true};
    pg::execute(store.recovers ? *kept_point_by[proof.kind] : *kept_by[proof.kind], store, values, "   ", why, none);
    if (!none[0] && (DatumGetInt32(why[0]) > 1 || !none[1]))
      refuse_forgetting(given_key, DatumGetInt32(why[0]), none[1] ? nullptr : text_to_cstring(DatumGetTextPP(why[1])));
  }
  if (done == 0) not_in_progress(store, ns, key, given_key, "fail", proof);
  pg::finish(ns, key);
  pg::count(pg::transient_failures);
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

// Moves the lease of the caller's claim on: the in_progress record keeps its
// fence and attempt, and its lease runs again from now. With a point, it
// records the recovery point and its state (NULL for none) too. Returns the
// new end of the lease.
TimestampTz extend(FunctionCallInfo fcinfo, const Heartbeat& args) {
  const bool recording = args.point >= 0;
  const char* function = args.function;
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  if (PG_ARGISNULL(args.fence))
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency fence must not be null",
                      std::string(function) + " acts for the claim that drew the fence: pass the fence idem_begin "
                      "answered with fresh.");
  const pg::Claim proof = proof_arg(fcinfo, args.fence, true);
  text* point = recording ? point_arg(fcinfo, args.point) : nullptr;
  Jsonb* state = recording && !PG_ARGISNULL(args.state) ? PG_GETARG_JSONB_P(args.state) : nullptr;
  const pg::Policy policy = pg::authorize(ns);
  // On a store Citus distributes, only on the node of the key's shard (its
  // entry point, <table>_extend_lease or <table>_record_point: open_store).
  pg::refuse_where_citus_would_split_the_store(fcinfo, pg::citus_distributes(policy.store));
  if (state != nullptr) {
    pg::check_payload_size(state, "recovery state", ns, policy);
    pg::check_utf8(&state->root);
  }
  pg::require_read_write(given_key, function, recording ? "record a recovery point of" : "extend the lease of");
  if (policy.lease_us == 0)
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      "idempotency namespace \"" + pg::string_of(ns) + "\" has no in_progress_lease",
                      recording ? "Without a lease a claim is held by its transaction and ends with it: a retry "
                                  "never resumes it, so it has no recovery points."
                                : "Without a lease a claim is held by its transaction and ends with it: there is no "
                                  "lease to extend.",
                      "Give the namespace one with idem_namespace_configure(namespace, in_progress_lease => ...).");
  text* key = pg::stored_key(given_key, policy);
  const pg::Store store = pg::open_store(ns, policy.store, RowExclusiveLock,
                                         pg::Call{key, policy.hash_keys, args.entry_point});
  if (recording && !store.recovers) {
    const pg::ShapeProblem why = pg::recovery_columns_problem(store, policy.store);
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      "the store of idempotency namespace \"" + pg::string_of(ns) + "\" cannot keep recovery points",
                      why.problem != nullptr ? why.problem : "",
                      why.fix != nullptr ? why.fix
                                         : (store.own ? "Update the extension: ALTER EXTENSION idempotency UPDATE."
                                                      : "Copy the rows into a table idem_create_store makes, and "
                                                        "bind the namespace to it."));
  }
  if (pg::held_claim(ns, key) != nullptr) {  // made before the namespace had a lease
    char label[32];
    pg::key_label(given_key, label);
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string(recording ? "cannot record a recovery point of idempotency key "
                                            : "cannot extend the lease of idempotency key ") +
                          label + ": this transaction holds it by its lock",
                      "The claim was made before namespace \"" + pg::string_of(ns) +
                          "\" had a lease: it is held by this transaction and ends with it.");
  }
  const Datum values[5] = {PointerGetDatum(ns), PointerGetDatum(key), Int64GetDatum(proof.value),
                           PointerGetDatum(point), PointerGetDatum(state)};
  Datum claimed_at;
  bool none = true;
  if (pg::execute(recording ? record_point_fence : extend_fence, store, values, state != nullptr ? "     " : "    n",
                  &claimed_at, &none) == 0 ||
      none)
    not_in_progress(store, ns, key, given_key, recording ? "record a recovery point of" : "extend the lease of",
                    proof);
  if (recording) pg::count(pg::recovery_points);
  return DatumGetTimestampTz(claimed_at) + policy.lease_us;
}

}  // namespace

// A holder's heartbeat (0.7.0): its claim under a lease is not taken over
// while it keeps calling this within the lease.
IDEM_FUNCTION(idem_extend_lease) { PG_RETURN_TIMESTAMPTZ(extend(fcinfo, extend_lease_args)); }

// A holder's recovery point (1.0.0; 0.8.0's idem_record_point, with the
// fence last): how far its work got, which a begin that takes the claim
// over answers, and a heartbeat too.
IDEM_FUNCTION(idem_save_point) { PG_RETURN_TIMESTAMPTZ(extend(fcinfo, save_point_args)); }
IDEM_FUNCTION(idem_record_point) { PG_RETURN_TIMESTAMPTZ(extend(fcinfo, record_point_args)); }

// The 0.5.0 entry points take a fence (bigint); the 0.2.0 to 0.4.1
// definitions, which a schema not yet updated still has, take an attempt
// number (integer) or nothing.

// Records the result of the caller's in-progress operation; every later
// begin with the same request replays it (prior_result).
IDEM_FUNCTION(idem_commit_0_5) {
  finish(fcinfo, true, true);
  PG_RETURN_VOID();
}
IDEM_FUNCTION(idem_commit) {
  finish(fcinfo, true, false);
  PG_RETURN_VOID();
}

// Records a permanent error; every later begin with the same request
// replays it (prior_error).
IDEM_FUNCTION(idem_fail_permanent_0_5) {
  finish(fcinfo, false, true);
  PG_RETURN_VOID();
}
IDEM_FUNCTION(idem_fail_permanent) {
  finish(fcinfo, false, false);
  PG_RETURN_VOID();
}

// Forgets the in-progress operation so that the next begin is fresh. 0.8.0
// refuses a record whose work may have had effects (taken over, or with a
// recovery point): its own symbol, so that a session still running an
// older library, which would forget it, is refused after the update.
IDEM_FUNCTION(idem_fail_transient_0_8) {
  forget(fcinfo, true);
  PG_RETURN_VOID();
}
IDEM_FUNCTION(idem_fail_transient_0_5) {
  forget(fcinfo, true);
  PG_RETURN_VOID();
}
IDEM_FUNCTION(idem_fail_transient) {
  forget(fcinfo, false);
  PG_RETURN_VOID();
}
