// decide_test.cpp: the begin's decision (src/core/decide.hpp), checked on
// every look there is (3 x 3 x 2^7 = 1,152; no fuzzer could reach more)
// against the invariants the store promises, then on the cases the docs
// name one by one.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/decide.hpp"

using idem::core::decide;
using idem::core::Found;
using idem::core::Look;
using idem::core::Place;
using idem::core::Step;

namespace {

// Calls check on every look, with a description for failure messages.
void every_look(const std::function<void(const Look&, const std::string&)>& check) {
  for (Found found : {Found::nothing, Found::busy, Found::row})
    for (char status : {'i', 'c', 'f'})
      for (int bits = 0; bits < 128; ++bits) {
        const Look l{found,         status,       (bits & 1) != 0,  (bits & 2) != 0,  (bits & 4) != 0,
                     (bits & 8) != 0, (bits & 16) != 0, (bits & 32) != 0, (bits & 64) != 0};
        check(l, "found " + std::to_string(static_cast<int>(found)) + " status " + status + " bits " +
                     std::to_string(bits));
      }
}

bool row(const Look& l) { return l.found == Found::row; }

}  // namespace

// A key is claimed only where this begin holds the key's lock and nothing,
// no record and no claim of this transaction, is under it.
TEST(Decide, ClaimsOnlyAnEmptyKeyItHoldsTheLockOf) {
  every_look([](const Look& l, const std::string& at) {
    if (decide(l) == Step::claim) {
      EXPECT_TRUE(l.found == Found::nothing && l.key_locked && !l.held_here) << at;
    }
  });
}

// A record is taken over only when it is in progress for the same request,
// abandoned (its lease over), not this transaction's, not already found
// locked at this version, and the key's lock is held: one takeover at a time.
TEST(Decide, TakesOverOnlyAnAbandonedRecordOfTheSameRequest) {
  every_look([](const Look& l, const std::string& at) {
    if (decide(l) == Step::take_over) {
      EXPECT_TRUE(row(l) && l.status == 'i' && l.same_request && !l.own && l.lease_over && !l.tried &&
                  l.key_locked && !l.held_here)
          << at;
    }
  });
}

// A different request under a recorded key is rejected, never claimed,
// taken over, waited for or replayed; the same request never is.
TEST(Decide, AnotherRequestIsAlwaysAMismatch) {
  every_look([](const Look& l, const std::string& at) {
    const bool differs = l.held_here ? !l.same_request : row(l) && !l.same_request;
    EXPECT_EQ(decide(l) == Step::mismatch, differs) << at;
  });
}

// A finished record of the same request replays what it recorded, whatever
// the locks: its work is done.
TEST(Decide, AFinishedRecordReplays) {
  every_look([](const Look& l, const std::string& at) {
    if (l.held_here || !row(l) || l.status == 'i' || !l.same_request) return;
    EXPECT_EQ(decide(l), l.status == 'c' ? Step::prior_result : Step::prior_error) << at;
  });
}

// A begin waits only when asked to, and only for a holder it cannot see
// through: never for its own claim, a record, or an empty key it holds.
TEST(Decide, WaitsOnlyForAnotherHolderWhenAsked) {
  every_look([](const Look& l, const std::string& at) {
    if (decide(l) != Step::wait) return;
    EXPECT_TRUE(l.may_wait && !l.held_here) << at;
    EXPECT_TRUE(l.found == Found::busy || !l.key_locked) << at;
  });
}

// The own claim answers in flight (the work is this transaction's, not
// done) and is never claimed or taken over again.
TEST(Decide, TheTransactionsOwnClaimIsInFlight) {
  every_look([](const Look& l, const std::string& at) {
    const Step s = decide(l);
    if (l.held_here && l.same_request) {
      EXPECT_EQ(s, Step::in_flight) << at;
    }
    if (!l.held_here && row(l) && l.own && l.status == 'i' && l.same_request) {
      EXPECT_EQ(s, Step::in_flight) << at;
    }
  });
}

TEST(Decide, NamedCases) {
  Look l{};
  l.found = Found::nothing, l.key_locked = true;
  EXPECT_EQ(decide(l), Step::claim);
  l.key_locked = false;  // another begin between its look and its insert, or its claim held by the lock
  EXPECT_EQ(decide(l), Step::in_flight);
  l.may_wait = true;
  EXPECT_EQ(decide(l), Step::wait);

  l = Look{};
  l.found = Found::row, l.status = 'i', l.same_request = true, l.key_locked = true;
  EXPECT_EQ(decide(l), Step::in_flight);  // a live holder's claim
  l.lease_over = true;
  EXPECT_EQ(decide(l), Step::take_over);
  l.tried = true;  // locked by a late worker: the second look answers in flight
  EXPECT_EQ(decide(l), Step::in_flight);
}

TEST(Decide, FinalWithoutLocksIsASettledFinishedRow) {
  every_look([](const Look& l, const std::string& at) {
    EXPECT_EQ(idem::core::final_without_locks(l, true), row(l) && l.status != 'i') << at;
    EXPECT_FALSE(idem::core::final_without_locks(l, false)) << at;
  });
}

TEST(Decide, HoldsByLockOnlyWhereNothingOutlivesTheTransaction) {
  for (int bits = 0; bits < 8; ++bits)
    for (long held : {0L, 7L, 8L}) {
      const Place p{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, held, 8};
      EXPECT_EQ(idem::core::hold_by_lock(p), !p.lease && p.direct_own && !p.distributed && held < 8)
          << bits << " " << held;
    }
}
