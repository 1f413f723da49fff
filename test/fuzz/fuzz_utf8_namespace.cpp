// fuzz_utf8_namespace.cpp: libFuzzer target for the UTF-8 helpers in
// src/core/utf8.hpp and for validate_namespace (src/core/namespace.hpp).
//
// The whole input is both the byte string to decode and the namespace.
// Properties checked on every input:
//  - next_code_point, stepped over the input (restarting one byte further on
//    after each error), agrees with the independent table-driven decoder at
//    every offset: the same code point and length, or Error 22021 naming that
//    offset where the decoder finds an ill-formed sequence (the first 16 such
//    offsets per input);
//  - is_white_space agrees with Unicode's 25-element White_Space list for each
//    decoded code point and for every 32-bit value read from the input;
//  - format_code_point writes "U+" and at least four upper-case hex digits;
//  - validate_namespace accepts exactly 1..64 bytes of a-z 0-9 '-' '_'; else
//    22023 (empty; too long; or naming the first other character, quoted when
//    printable ASCII, and its 1-based position) or 22021 when that first other
//    character is malformed UTF-8.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "core/namespace.hpp"
#include "core/utf8.hpp"
#include "fuzz_support.hpp"

using idem::core::Slice;
using idem_fuzz::capture;
using idem_fuzz::contains;
using idem_fuzz::Outcome;

namespace {

// Checks is_white_space and format_code_point for one value.
void check_code_point_helpers(char32_t c) {
  FUZZ_CHECK(idem::core::is_white_space(c) == idem_fuzz::oracle_white_space(c));
  char out[12];
  std::memset(out, '#', sizeof out);
  idem::core::format_code_point(c, out);
  FUZZ_CHECK(std::memchr(out, '\0', sizeof out) != nullptr);
  FUZZ_CHECK(std::string(out) == idem_fuzz::oracle_code_point_name(c));
}

// Steps next_code_point over the input and compares it with decode_one.
// Only the first 16 ill-formed offsets are handed to next_code_point: each is
// a C++ throw, and random input has hundreds, which would make every run slow
// without reaching new code.
void check_decoder(const std::uint8_t* bytes, std::size_t size) {
  const char* s = reinterpret_cast<const char*>(bytes);
  int errors_left = 16;
  for (std::size_t at = 0; at < size;) {
    char32_t want = 0;
    const std::size_t len = idem_fuzz::decode_one(bytes, size, at, want);
    if (len == 0 && errors_left-- <= 0) {
      ++at;
      continue;
    }
    std::size_t i = at;
    char32_t got = 0;
    const Outcome o = capture([&] { got = idem::core::next_code_point(s, size, i); });
    if (len == 0) {
      FUZZ_CHECK(o.threw && o.sqlstate == idem::core::sqlstate::character_not_in_repertoire);
      FUZZ_CHECK(o.detail == "Malformed byte sequence at byte offset " + std::to_string(at) + ".");
      ++at;
      continue;
    }
    FUZZ_CHECK(!o.threw);
    FUZZ_CHECK(got == want);
    FUZZ_CHECK(i == at + len);
    check_code_point_helpers(got);
    at = i;
  }
  // Arbitrary 32-bit values, out-of-range ones included.
  for (std::size_t k = 0; k + 4 <= size; k += 4) {
    std::uint32_t v = 0;
    for (std::size_t b = 0; b < 4; ++b) v = (v << 8) | bytes[k + b];
    check_code_point_helpers(static_cast<char32_t>(v));
  }
}

// True for the namespace alphabet: a-z, 0-9, '-', '_'.
bool oracle_ns_char(unsigned char c) {
  return std::strchr("abcdefghijklmnopqrstuvwxyz0123456789-_", c) != nullptr && c != '\0';
}

// Checks validate_namespace on the whole input against the rules.
void check_namespace(const std::uint8_t* bytes, std::size_t size) {
  const Outcome o = capture([&] {
    idem::core::validate_namespace(Slice{reinterpret_cast<const char*>(bytes), size});
  });
  std::size_t bad = 0;
  while (bad < size && oracle_ns_char(bytes[bad])) ++bad;

  if (size == 0) {
    FUZZ_CHECK(o.threw && o.sqlstate == idem::core::sqlstate::invalid_parameter_value);
    FUZZ_CHECK(contains(o.detail, "empty"));
  } else if (bad < size) {
    char32_t c = 0;
    if (idem_fuzz::decode_one(bytes, size, bad, c) == 0) {
      FUZZ_CHECK(o.threw && o.sqlstate == idem::core::sqlstate::character_not_in_repertoire);
      return;
    }
    const std::string what = (c > 0x20 && c < 0x7F && c != '"')
                                 ? "\"" + std::string(1, static_cast<char>(c)) + "\""
                                 : idem_fuzz::oracle_code_point_name(c);
    FUZZ_CHECK(o.threw && o.sqlstate == idem::core::sqlstate::invalid_parameter_value);
    FUZZ_CHECK(contains(o.detail, "Character " + what + " at position " + std::to_string(bad + 1) +
                                      " is not allowed"));
  } else if (size > idem::core::max_namespace_length) {
    FUZZ_CHECK(o.threw && o.sqlstate == idem::core::sqlstate::invalid_parameter_value);
    FUZZ_CHECK(contains(o.detail, "The namespace is " + std::to_string(size) + " characters long"));
  } else {
    FUZZ_CHECK(!o.threw);
  }
}

}  // namespace

// libFuzzer entry point: one byte string per input.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_decoder(data, size);
  check_namespace(data, size);
  return 0;
}
