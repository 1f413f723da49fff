// decide.cpp: the begin's decision (decide.hpp).
#include "decide.hpp"

namespace idem::core {

Step replay_of(const Look& look) noexcept {
  if (!look.same_request) return Step::mismatch;
  return look.status == 'c' ? Step::prior_result : Step::prior_error;
}

bool final_without_locks(const Look& look, bool settled) noexcept {
  return look.found == Found::row && look.status != 'i' && settled;
}

// Another transaction's claim held by its lock shows no row; a begin
// between its look and its insert shows none yet. A row this transaction
// wrote is its own claim whoever holds the lock now.
bool held_elsewhere(const Look& look) noexcept {
  const bool same_in_progress = look.found == Found::row && look.status == 'i' && look.same_request;
  return !look.held_here && !look.key_locked && (look.found == Found::nothing || (same_in_progress && !look.own));
}

// A claim this transaction holds by the key's lock is in flight (its own
// work, not done yet), or a mismatch with another request. A row with
// another request is a mismatch whoever holds the lock; an in_progress row
// is taken over only by a begin holding the key's lock, once per version,
// and never from its own transaction.
Step decide(const Look& look) noexcept {
  if (look.held_here) return look.same_request ? Step::in_flight : Step::mismatch;
  const Found found = held_elsewhere(look) ? Found::busy : look.found;
  const bool same_in_progress = found == Found::row && look.status == 'i' && look.same_request;
  if (found == Found::nothing) return Step::claim;
  if (found == Found::busy) return look.may_wait ? Step::wait : Step::in_flight;
  if (same_in_progress) {
    if (!look.own && look.lease_over && !look.tried) return Step::take_over;
    return Step::in_flight;
  }
  return replay_of(look);
}

bool hold_by_lock(const Place& place) noexcept {
  return !place.lease && place.direct_own && !place.distributed && place.held < place.held_limit;
}

}  // namespace idem::core
