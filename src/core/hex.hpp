// hex.hpp: lowercase hexadecimal encoding of digests.
#pragma once

#include <cstddef>
#include <cstdint>

namespace idem::core {

// Writes 2*size lowercase hex digits and a terminating NUL to out.
void to_hex(const std::uint8_t* data, std::size_t size, char* out) noexcept;

}  // namespace idem::core
