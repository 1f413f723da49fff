// fence.cpp: a fence from random bits (see fence.hpp).
#include "fence.hpp"

namespace idem::core {

std::int64_t fence_from_bits(std::uint64_t bits) noexcept {
  const auto value = static_cast<std::int64_t>(bits & UINT64_C(0x7FFFFFFFFFFFFFFF));
  return value >= first_fence ? value : -1;
}

}  // namespace idem::core
