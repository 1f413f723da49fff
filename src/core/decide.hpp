// decide.hpp: what a begin does with what it saw of its key. The server
// part (src/pg/begin.cpp) looks (the key's lock, the transaction's own
// claims, the probe, the clock) and acts; every choice between the five
// answers, a claim, a takeover and a wait is made here, without the server,
// so that it is tested exhaustively (test/unit/decide_test.cpp) and fuzzed
// (test/fuzz/fuzz_decide.cpp). docs/internals.md ("The store") tells why
// each rule is as it is.
#pragma once

namespace idem::core {

// What a look found under the key's name.
enum class Found {
  nothing,  // no record, no claim
  busy,     // a record another transaction is inserting, changing or deleting
  row,      // a record committed, or written by this transaction
};

// What a begin saw of its key, under the namespace's lock.
struct Look {
  Found found;
  char status;        // row: 'i' in_progress, 'c' committed, 'f' failed
  bool same_request;  // row, or held_here: its request's fingerprint is the submitted one's
  bool own;           // row: this transaction wrote it
  bool key_locked;    // this begin holds the key's lock now
  bool held_here;     // this transaction holds the key's claim by that lock alone, with no row
  bool lease_over;    // row in_progress: its lease (or, without one, its replay window) ran out
  bool tried;         // row: a takeover of this very version found it locked by another transaction
  bool may_wait;      // the call waits for holders, and time is left
};

// How a fresh claim is kept: by the key's lock held to the transaction's
// end, with no row until it finishes, or as an in_progress row.
struct Place {
  bool lease;         // the namespace has a lease: a claim must outlive its transaction
  bool direct_own;    // the extension's own table, written directly (not bound, not through SQL)
  bool distributed;   // Citus distributes the store
  long held;          // keys this transaction already holds by their lock
  long held_limit;    // how many it may
};

enum class Step {
  claim,         // insert the fresh in_progress record: fresh, attempt 1
  take_over,     // take over the abandoned record: fresh, the next attempt
  wait,          // wait for the holder, then look again
  in_flight,     // answer in_flight
  prior_result,  // replay the committed result
  prior_error,   // replay the recorded failure
  mismatch,      // another request was recorded under the key
};

// The step for what a begin saw under the namespace's lock.
Step decide(const Look& look) noexcept;

// Whether the key's lock, which this begin could not take, says another
// transaction holds the key though the look shows no claim of its own: a
// claim held by that lock alone, or a begin between its look and its
// insert or takeover. decide answers it as a busy record whose holder and
// age are unknown; the server waits for that lock.
bool held_elsewhere(const Look& look) noexcept;

// Whether a record seen by the first look, without the namespace's or the
// key's lock, is final and answers the begin there: a committed or failed
// row (found row, status not 'i') whose version the server says was
// settled before the caller's policy was read (settled).
bool final_without_locks(const Look& look, bool settled) noexcept;

// The answer a final record gives: its replay, or a mismatch.
Step replay_of(const Look& look) noexcept;

// Whether a fresh claim is held by the key's lock alone (else written as a
// row): only where nothing outlives the transaction, and only for the
// extension's own table written directly, within the lock table's share.
bool hold_by_lock(const Place& place) noexcept;

}  // namespace idem::core
