// namespace.hpp: the consumer namespace rule (the seed's ConsumerNamespace).
#pragma once

#include "utf8.hpp"

namespace idem::core {

inline constexpr std::size_t max_namespace_length = 64;

// Accepts 1 to 64 characters of a-z, 0-9, '-' and '_'; throws Error(22023)
// saying which rule failed otherwise.
void validate_namespace(Slice ns);

}  // namespace idem::core
