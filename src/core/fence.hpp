// fence.hpp: what a fence is. A claim's fence is a number drawn at random
// from [2^32, 2^63): two claims of one key, in one database or in any two
// copies of it (a restored dump, a promoted standby, a logical replica),
// get the same fence with probability below 2^-62, which no counter that a
// copy carries along can promise. Fences are compared for equality only.
#pragma once

#include <cstdint>

namespace idem::core {

// The smallest fence: above every int4, so that an attempt number passed
// where the fence belongs is recognised and refused.
inline constexpr std::int64_t first_fence = INT64_C(4294967296);

// The fence that 64 random bits give, or -1 when they fall below
// first_fence (probability 2^-31): the caller draws again. The top bit is
// dropped, so every fence is a positive bigint.
std::int64_t fence_from_bits(std::uint64_t bits) noexcept;

}  // namespace idem::core
