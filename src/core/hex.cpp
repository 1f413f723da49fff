// hex.cpp: lowercase hexadecimal encoding.
#include "hex.hpp"

namespace idem::core {

void to_hex(const std::uint8_t* data, std::size_t size, char* out) noexcept {
  static constexpr char digits[] = "0123456789abcdef";
  for (std::size_t i = 0; i < size; ++i) {
    out[2 * i] = digits[data[i] >> 4];
    out[2 * i + 1] = digits[data[i] & 0x0F];
  }
  out[2 * size] = '\0';
}

}  // namespace idem::core
