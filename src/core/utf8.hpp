// utf8.hpp: decoding UTF-8 one code point at a time, and the Unicode
// White_Space set that key trimming and blank checks use.
#pragma once

#include <cstddef>
#include <cstdint>

namespace idem::core {

// A borrowed run of bytes; the core never owns caller text.
struct Slice {
  const char* data;
  std::size_t size;
};

// Decodes the code point starting at s[i] (i < n) and advances i past it.
// Throws Error(22021) on malformed UTF-8, overlong forms, surrogates or
// values above U+10FFFF: callers hand the core text PostgreSQL has already
// validated, so this only fires on a bug or in fuzzing.
char32_t next_code_point(const char* s, std::size_t n, std::size_t& i);

// True for the 25 code points of Unicode's White_Space property.
bool is_white_space(char32_t c) noexcept;

// Formats a code point as "U+XXXX" (at least four upper-case hex digits) into out[12].
void format_code_point(char32_t c, char out[12]) noexcept;

}  // namespace idem::core
