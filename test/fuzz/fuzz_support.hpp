// fuzz_support.hpp: what the libFuzzer targets in test/fuzz/ share: a property
// check that aborts (so libFuzzer saves the input), capturing idem::core::Error,
// and test oracles written independently of src/core/ (a table-driven strict
// UTF-8 decoder after Unicode's table of well-formed byte sequences, and the
// White_Space set as a sorted list).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/utf8.hpp"

namespace idem_fuzz {

// Reports a failed property and aborts: libFuzzer treats the abort as a crash,
// prints the stack and writes the input to the artifact file.
[[noreturn]] inline void fail(const char* file, int line, const char* what) {
  std::fprintf(stderr, "\nPROPERTY FAILED at %s:%d: %s\n", file, line, what);
  std::abort();
}

// FUZZ_CHECK(cond): a property that must hold for every input.
#define FUZZ_CHECK(cond) \
  do {                                                                     \
    if (!(cond)) ::idem_fuzz::fail(__FILE__, __LINE__, #cond);            \
  } while (0)

// The outcome of calling into the core: returned normally, or threw
// idem::core::Error (whose SQLSTATE and detail are kept for checking).
struct Outcome {
  bool threw = false;
  std::string sqlstate;
  std::string detail;
};

// Runs f and captures an idem::core::Error. Any other exception is a finding:
// the core promises to throw only Error (or std::bad_alloc, which a fuzz input
// this small cannot cause).
template <class F>
Outcome capture(F&& f) {
  Outcome o;
  try {
    f();
  } catch (const idem::core::Error& e) {
    o.threw = true;
    o.sqlstate = e.sqlstate();
    o.detail = e.detail();
  } catch (...) {
    fail(__FILE__, __LINE__, "the core threw something other than idem::core::Error");
  }
  return o;
}

// True when text contains needle (for checking error details).
inline bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// Decodes the well-formed UTF-8 sequence starting at s[i] (i < n): returns its
// byte length and sets cp, or returns 0 when the bytes there are ill-formed.
// Follows Unicode's "Well-Formed UTF-8 Byte Sequences" table row by row, so it
// shares no logic with the core's mask-and-range-check decoder.
inline std::size_t decode_one(const unsigned char* s, std::size_t n, std::size_t i, char32_t& cp) {
  const unsigned b0 = s[i];
  if (b0 <= 0x7F) {
    cp = b0;
    return 1;
  }
  std::size_t len;
  unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  unsigned lead_bits;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, lead_bits = b0 - 0xC0;
  } else if (b0 == 0xE0) {
    len = 3, lo = 0xA0, lead_bits = 0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    len = 3, lead_bits = b0 - 0xE0;
  } else if (b0 == 0xED) {
    len = 3, hi = 0x9F, lead_bits = 0x0D;
  } else if (b0 == 0xF0) {
    len = 4, lo = 0x90, lead_bits = 0;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    len = 4, lead_bits = b0 - 0xF0;
  } else if (b0 == 0xF4) {
    len = 4, hi = 0x8F, lead_bits = 4;
  } else {
    return 0;  // C0, C1, F5..FF, or a stray continuation byte
  }
  if (n - i < len) return 0;
  if (s[i + 1] < lo || s[i + 1] > hi) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
  char32_t v = lead_bits;
  for (std::size_t k = 1; k < len; ++k) v = v * 64 + (s[i + k] - 0x80);
  cp = v;
  return len;
}

// A whole byte string decoded: ok is false at the first ill-formed sequence,
// whose byte offset is bad_at; cps and offsets hold what decoded before it.
struct Decoded {
  bool ok = true;
  std::size_t bad_at = 0;
  std::vector<char32_t> cps;
  std::vector<std::size_t> offsets;  // byte offset of each code point; then the total size
};

// Decodes all of [s, s+n) with decode_one.
inline Decoded decode_all(const unsigned char* s, std::size_t n) {
  Decoded d;
  std::size_t i = 0;
  while (i < n) {
    char32_t cp;
    const std::size_t len = decode_one(s, n, i, cp);
    if (len == 0) {
      d.ok = false;
      d.bad_at = i;
      return d;
    }
    d.cps.push_back(cp);
    d.offsets.push_back(i);
    i += len;
  }
  d.offsets.push_back(n);
  return d;
}

inline Decoded decode_all(const std::string& s) {
  return decode_all(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

// Unicode's White_Space property (PropList.txt), written out as a sorted list.
inline bool oracle_white_space(char32_t c) {
  static const char32_t set[] = {0x0009, 0x000A, 0x000B, 0x000C, 0x000D, 0x0020, 0x0085,
                                 0x00A0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                                 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
                                 0x2029, 0x202F, 0x205F, 0x3000};
  static_assert(sizeof set / sizeof set[0] == 25, "White_Space has 25 code points");
  return std::binary_search(std::begin(set), std::end(set), c);
}

// "U+" and the code point in upper-case hex, zero-padded to at least four digits.
inline std::string oracle_code_point_name(char32_t c) {
  std::string digits;
  for (std::uint32_t v = c; v != 0; v /= 16) digits.insert(digits.begin(), "0123456789ABCDEF"[v % 16]);
  while (digits.size() < 4) digits.insert(digits.begin(), '0');
  return "U+" + digits;
}

}  // namespace idem_fuzz
