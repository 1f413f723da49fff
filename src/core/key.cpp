// key.cpp: key parsing and minting rules.
#include "key.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include "error.hpp"
#include "hex.hpp"
#include "sha256.hpp"

namespace idem::core {

namespace {

[[noreturn]] void invalid_key(std::string detail) {
  throw Error(sqlstate::invalid_parameter_value, "invalid idempotency key", std::move(detail));
}

[[noreturn]] void invalid_part(std::size_t pos, const char* what) {
  throw Error(sqlstate::invalid_parameter_value, "invalid idempotency key part",
              "Part " + std::to_string(pos) + " is " + what + ".");
}

bool is_control(char32_t c) noexcept { return c < 0x20 || c == 0x7F; }

// True when s holds only white space (or nothing).
bool is_blank(Slice s) {
  for (std::size_t i = 0; i < s.size;)
    if (!is_white_space(next_code_point(s.data, s.size, i))) return false;
  return true;
}

void put_be32(std::uint8_t out[4], std::size_t v) {
  out[0] = static_cast<std::uint8_t>(v >> 24);
  out[1] = static_cast<std::uint8_t>(v >> 16);
  out[2] = static_cast<std::uint8_t>(v >> 8);
  out[3] = static_cast<std::uint8_t>(v);
}

}  // namespace

Slice parse_key(Slice raw) {
  // Find the first and one-past-last non-white-space code points.
  std::size_t begin = raw.size, end = 0;
  for (std::size_t i = 0; i < raw.size;) {
    const std::size_t at = i;
    if (!is_white_space(next_code_point(raw.data, raw.size, i))) {
      if (begin == raw.size) begin = at;
      end = i;
    }
  }
  if (begin == raw.size) invalid_key("The key is blank: it is empty or only white space.");

  const Slice key{raw.data + begin, end - begin};
  std::size_t length = 0;
  std::size_t first_control = 0;  // 1-based position, 0 if none
  char32_t control = 0;
  for (std::size_t i = 0; i < key.size;) {
    const char32_t c = next_code_point(key.data, key.size, i);
    ++length;
    if (first_control == 0 && is_control(c)) first_control = length, control = c;
  }
  if (length > max_key_length)
    invalid_key("The key is " + std::to_string(length) +
                " characters long after trimming; the limit is 255.");
  if (first_control != 0) {
    char cp[12];
    format_code_point(control, cp);
    invalid_key("The key contains control character " + std::string(cp) + " at position " +
                std::to_string(first_control) + ".");
  }
  return key;
}

void mint_key(const Slice* parts, std::size_t count, char out[minted_key_length + 1]) {
  if (count == 0)
    throw Error(sqlstate::invalid_parameter_value, "cannot mint an idempotency key from no parts",
                "Pass an array with at least one non-blank part.");
  constexpr std::size_t max32 = std::numeric_limits<std::uint32_t>::max();
  if (count > max32) invalid_part(max32 + 1, "beyond the 4-byte part count");

  for (std::size_t i = 0; i < count; ++i) {
    if (parts[i].data == nullptr) invalid_part(i + 1, "null");
    if (parts[i].size == 0) invalid_part(i + 1, "empty");
    if (is_blank(parts[i])) invalid_part(i + 1, "blank (only white space)");
    if (parts[i].size > max32) invalid_part(i + 1, "longer than a 4-byte length can describe");
  }

  Sha256 h;
  std::uint8_t be[4];
  put_be32(be, count);
  h.update(be, sizeof be);
  for (std::size_t i = 0; i < count; ++i) {
    put_be32(be, parts[i].size);
    h.update(be, sizeof be);
    h.update(parts[i].data, parts[i].size);
  }
  const Digest d = h.finish();
  to_hex(d.data(), d.size(), out);
}

}  // namespace idem::core
