// fence_test.cpp: how 64 random bits become a fence: the top bit dropped,
// every value below 2^32 refused, every other value kept as it is.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/fence.hpp"

using idem::core::fence_from_bits;
using idem::core::first_fence;

TEST(Fence, FirstFenceIsTwoToThe32) { EXPECT_EQ(first_fence, INT64_C(4294967296)); }

TEST(Fence, BitsBelowTwoToThe32AreDrawnAgain) {
  EXPECT_EQ(fence_from_bits(0), -1);
  EXPECT_EQ(fence_from_bits(1), -1);
  EXPECT_EQ(fence_from_bits(UINT64_C(0xFFFFFFFF)), -1);
  // With the top bit set, the rest still decides.
  EXPECT_EQ(fence_from_bits(UINT64_C(0x80000000FFFFFFFF)), -1);
  EXPECT_EQ(fence_from_bits(UINT64_C(0x8000000000000000)), -1);
}

TEST(Fence, OtherBitsAreTheFenceWithoutTheTopBit) {
  EXPECT_EQ(fence_from_bits(UINT64_C(0x100000000)), INT64_C(4294967296));
  EXPECT_EQ(fence_from_bits(UINT64_C(0x7FFFFFFFFFFFFFFF)), INT64_C(9223372036854775807));
  EXPECT_EQ(fence_from_bits(UINT64_C(0xFFFFFFFFFFFFFFFF)), INT64_C(9223372036854775807));
  EXPECT_EQ(fence_from_bits(UINT64_C(0x8123456789ABCDEF)), INT64_C(0x0123456789ABCDEF));
}

TEST(Fence, EveryFenceIsPositiveAndAtLeastTheFirst) {
  std::uint64_t x = UINT64_C(0x9E3779B97F4A7C15);
  for (int i = 0; i < 100000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    const std::int64_t f = fence_from_bits(x);
    if (f != -1) {
      EXPECT_GE(f, first_fence);
    }
  }
}
