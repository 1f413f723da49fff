// fence.hpp: drawing a claim's fence from PostgreSQL's strong random source.
#pragma once

#include "postgres.hpp"

namespace idem::pg {

// A new fence (core/fence.hpp): 63 bits from pg_strong_random, at or above
// 2^32. Raises XX000 if the random source fails.
int64 draw_fence();

}  // namespace idem::pg
