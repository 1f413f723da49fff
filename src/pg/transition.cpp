// transition.cpp: the terminal transitions of an in-progress record:
// idem_commit, idem_fail_permanent (both kept for replay) and
// idem_fail_transient (forgotten, so the next begin is fresh).
#include <algorithm>
#include <cstring>
#include <string>

#include "../core/error.hpp"
#include "guard.hpp"
#include "policy.hpp"
#include "spi.hpp"
#include "stats.hpp"
#include "text.hpp"

using namespace idem;

namespace {

// The unfenced statements serve 0.3.0's schema too, which has no attempt
// column; the fenced ones add one condition to the same SQL.
#define FINISH_IN_PROGRESS                                                               \
  "UPDATE idempotency.idempotency_record"                                              \
  " SET status = $3, result_payload = $4, error_payload = $5, updated_at = pg_catalog.now()" \
  " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2"     \
  " AND status OPERATOR(pg_catalog.=) 'in_progress'"
#define FORGET_IN_PROGRESS                                                           \
  "DELETE FROM idempotency.idempotency_record"                                     \
  " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2" \
  " AND status OPERATOR(pg_catalog.=) 'in_progress'"

pg::Statement finish_in_progress = {
    FINISH_IN_PROGRESS,
    5,
    {TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID},
    nullptr};

// The same two, fenced: only while the record is still the caller's attempt.
pg::Statement finish_attempt = {
    FINISH_IN_PROGRESS " AND attempt OPERATOR(pg_catalog.=) $6",
    6,
    {TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, INT4OID},
    nullptr};

pg::Statement forget_attempt = {
    FORGET_IN_PROGRESS " AND attempt OPERATOR(pg_catalog.=) $3",
    3,
    {TEXTOID, TEXTOID, INT4OID},
    nullptr};

pg::Statement forget_in_progress = {
    FORGET_IN_PROGRESS,
    2,
    {TEXTOID, TEXTOID},
    nullptr};

pg::Statement current_status = {
    "SELECT status FROM idempotency.idempotency_record"
    " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2",
    2,
    {TEXTOID, TEXTOID},
    nullptr};

// The attempt an in_progress record is at (0.4.0's schema: only fenced
// calls ask).
pg::Statement current_attempt = {
    "SELECT attempt FROM idempotency.idempotency_record"
    " WHERE namespace OPERATOR(pg_catalog.=) $1 AND key_value OPERATOR(pg_catalog.=) $2",
    2,
    {TEXTOID, TEXTOID},
    nullptr};

// The attempt argument (argno) of a fenced call, or 0 when there is none:
// the 0.3.0 definitions have no such argument, and NULL means unfenced.
int32 attempt_arg(FunctionCallInfo fcinfo, int argno) {
  if (PG_NARGS() <= argno || PG_ARGISNULL(argno)) return 0;
  const int32 attempt = PG_GETARG_INT32(argno);
  if (attempt < 1)
    throw core::Error(core::sqlstate::invalid_parameter_value, "invalid idempotency attempt",
                      "attempt is the positive number idem_begin answered with fresh, or NULL, not " +
                          std::to_string(attempt) + ".");
  return attempt;
}

// Called when no in_progress row matched: says why, with SQLSTATE 55000.
// Every PostgreSQL call comes first; strings are built only to throw.
// given_key is the caller's key, named in the message only by key_label.
[[noreturn]] void not_in_progress(text* ns, text* key, const text* given_key, const char* action, int32 attempt) {
  char label[32];
  pg::key_label(given_key, label);
  const Datum values[2] = {PointerGetDatum(ns), PointerGetDatum(key)};
  Datum status;
  bool none = true;
  pg::execute(current_status, values, "  ", &status, &none);
  const text* status_text = none ? nullptr : DatumGetTextPP(status);
  if (none)
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string("cannot ") + action + " an idempotency record that is not in progress",
                      "No record exists for key " + std::string(label) + " in namespace \"" + pg::string_of(ns) +
                          "\" (or it belongs to a transaction that has not committed); "
                          "idem_begin must answer fresh first.");
  if (attempt > 0 && pg::string_of(status_text) == "in_progress") {
    Datum current;
    bool unknown = true;
    pg::execute(current_attempt, values, "  ", &current, &unknown);
    const int32 holder = unknown ? 0 : DatumGetInt32(current);
    if (holder > attempt)
      throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                        std::string("cannot ") + action + " an idempotency record taken over by another attempt",
                        "The record for key " + std::string(label) + " is in progress under attempt " +
                            std::to_string(holder) + ", not " + std::to_string(attempt) +
                            ": that attempt outlived the namespace's in_progress_lease and a later begin took the "
                            "record over. Only the attempt holding the record may finish it.");
    throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                      std::string("cannot ") + action + " an idempotency record under an attempt it has not reached",
                      "The record for key " + std::string(label) + " is in progress under attempt " +
                          std::to_string(holder) + "; no begin has answered attempt " + std::to_string(attempt) +
                          ". Pass the attempt that idem_begin answered with fresh.");
  }
  throw core::Error(core::sqlstate::object_not_in_prerequisite_state,
                    std::string("cannot ") + action + " an idempotency record that is not in progress",
                    "The record for key " + std::string(label) + " is already " + pg::string_of(status_text) +
                        "; committed and failed records are final.");
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
// the error payload).
void finish(FunctionCallInfo fcinfo, bool committing) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  const char* status = committing ? "committed" : "failed";
  Jsonb* payload = pg::payload_arg(fcinfo, 2, committing ? "result" : "error");
  const int32 attempt = attempt_arg(fcinfo, 3);
  const pg::Policy policy = pg::authorize(ns);
  pg::check_payload_size(payload, committing ? "result" : "error", ns, policy);
  if (!committing) check_error_payload(payload);
  pg::require_read_write(given_key, committing ? "idem_commit" : "idem_fail_permanent",
                         committing ? "commit" : "fail");
  text* key = pg::stored_key(given_key, policy);
  const Datum values[6] = {PointerGetDatum(ns),      PointerGetDatum(key),     CStringGetTextDatum(status),
                           PointerGetDatum(payload), PointerGetDatum(payload), Int32GetDatum(attempt)};
  const char* nulls = committing ? "    n " : "   n  ";
  if (pg::execute(attempt > 0 ? finish_attempt : finish_in_progress, values, nulls) == 0)
    not_in_progress(ns, key, given_key, committing ? "commit" : "fail", attempt);
  pg::count(committing ? pg::commits : pg::permanent_failures);
}

}  // namespace

// Records the result of the caller's in-progress operation; every later
// begin with the same request replays it (prior_result).
IDEM_FUNCTION(idem_commit) {
  finish(fcinfo, true);
  PG_RETURN_VOID();
}

// Records a permanent error; every later begin with the same request
// replays it (prior_error).
IDEM_FUNCTION(idem_fail_permanent) {
  finish(fcinfo, false);
  PG_RETURN_VOID();
}

// Deletes the in-progress row so the next begin is fresh; never touches a
// committed or failed row.
IDEM_FUNCTION(idem_fail_transient) {
  text* ns = pg::namespace_arg(fcinfo, 0);
  text* given_key = pg::key_arg(fcinfo, 1);
  const int32 attempt = attempt_arg(fcinfo, 2);
  const pg::Policy policy = pg::authorize(ns);
  pg::require_read_write(given_key, "idem_fail_transient", "fail");
  text* key = pg::stored_key(given_key, policy);
  const Datum values[3] = {PointerGetDatum(ns), PointerGetDatum(key), Int32GetDatum(attempt)};
  if (pg::execute(attempt > 0 ? forget_attempt : forget_in_progress, values, "   ") == 0)
    not_in_progress(ns, key, given_key, "fail", attempt);
  pg::count(pg::transient_failures);
  PG_RETURN_VOID();
}
