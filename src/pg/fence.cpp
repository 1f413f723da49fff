// fence.cpp: a claim's fence, drawn at random (see core/fence.hpp for why
// not from a sequence).
#include "fence.hpp"

#include "../core/error.hpp"
#include "../core/fence.hpp"

namespace idem::pg {

int64 draw_fence() {
  for (;;) {  // a draw below 2^32 (probability 2^-31) is drawn again
    uint64 bits;
    if (!pg_strong_random(&bits, sizeof bits))
      throw core::Error(core::sqlstate::internal_error, "could not draw an idempotency fence",
                        "The server's strong random source (pg_strong_random) failed.");
    const int64 fence = core::fence_from_bits(bits);
    if (fence >= 0) return fence;
  }
}

}  // namespace idem::pg
