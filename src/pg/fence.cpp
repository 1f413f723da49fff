// fence.cpp: a claim's fence, drawn at random (see core/fence.hpp for why
// not from a sequence).
#include "fence.hpp"

#include "../core/error.hpp"
#include "../core/fence.hpp"

namespace idem::pg {

namespace {

// Random bits drawn ahead, 64 fences at a time: one call of the strong
// random source costs as much as the rest of a fresh begin's bookkeeping,
// and most of that cost is per call, not per byte. Per backend (drawn after
// the fork, never in the postmaster), and each word is used once.
uint64 drawn[64];
int next_drawn = static_cast<int>(sizeof drawn / sizeof drawn[0]);

// The next 64 unused random bits.
uint64 random_bits() {
  if (next_drawn == static_cast<int>(sizeof drawn / sizeof drawn[0])) {
    if (!pg_strong_random(drawn, sizeof drawn))
      throw core::Error(core::sqlstate::internal_error, "could not draw an idempotency fence",
                        "The server's strong random source (pg_strong_random) failed.");
    next_drawn = 0;
  }
  return drawn[next_drawn++];
}

}  // namespace

int64 draw_fence() {
  for (;;) {  // a draw below 2^32 (probability 2^-31) is drawn again
    const int64 fence = core::fence_from_bits(random_bits());
    if (fence >= 0) return fence;
  }
}

}  // namespace idem::pg
