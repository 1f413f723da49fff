// utf8.cpp: strict UTF-8 decoding and the White_Space table.
#include "utf8.hpp"

#include <cstdio>

#include "error.hpp"

namespace idem::core {

namespace {

[[noreturn]] void malformed(std::size_t at) {
  throw Error(sqlstate::character_not_in_repertoire, "invalid UTF-8 in idempotency input",
              "Malformed byte sequence at byte offset " + std::to_string(at) + ".");
}

}  // namespace

char32_t next_code_point(const char* s, std::size_t n, std::size_t& i) {
  const std::size_t start = i;
  const auto b0 = static_cast<unsigned char>(s[i++]);
  if (b0 < 0x80) return b0;

  int extra;
  char32_t cp;
  char32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    extra = 1, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    extra = 2, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    extra = 3, cp = b0 & 0x07, min = 0x10000;
  } else {
    malformed(start);
  }
  if (n - i < static_cast<std::size_t>(extra)) malformed(start);
  for (int k = 0; k < extra; ++k) {
    const auto b = static_cast<unsigned char>(s[i++]);
    if ((b & 0xC0) != 0x80) malformed(start);
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) malformed(start);
  return cp;
}

bool is_white_space(char32_t c) noexcept {
  switch (c) {
    case 0x0009: case 0x000A: case 0x000B: case 0x000C: case 0x000D:
    case 0x0020: case 0x0085: case 0x00A0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

void format_code_point(char32_t c, char out[12]) noexcept {
  std::snprintf(out, 12, "U+%04X", static_cast<unsigned>(c));
}

}  // namespace idem::core
