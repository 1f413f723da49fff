// fuzz_parse_key.cpp: libFuzzer target for idem::core::parse_key.
//
// The whole fuzz input is the raw key. Properties checked on every input:
//  - malformed UTF-8 anywhere in the input: Error 22021 naming the byte offset
//    of the first ill-formed sequence (parse_key decodes every code point while
//    trimming, so no malformed input gets through, wherever the bad byte is);
//  - well-formed input: exactly what an independent model of the rules says:
//    22023 "blank" when only White_Space, 22023 with the length when more than
//    255 code points remain after trimming, 22023 naming the first control
//    character and its 1-based position, or else the trimmed slice;
//  - a returned slice lies inside the input, is non-empty, starts and ends with
//    a non-white-space code point, is at most 255 code points, holds no control
//    character, and parsing it again returns the very same slice.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/key.hpp"
#include "fuzz_support.hpp"

using idem::core::Slice;
using idem_fuzz::capture;
using idem_fuzz::contains;
using idem_fuzz::Outcome;

namespace {

// The core's control characters: below U+0020, and U+007F.
bool oracle_control(char32_t c) { return c < 0x20 || c == 0x7F; }

// Checks the properties of a slice parse_key returned for input [data, data+size).
void check_returned_key(const char* data, std::size_t size, Slice key) {
  FUZZ_CHECK(key.size > 0);
  FUZZ_CHECK(key.data >= data);
  FUZZ_CHECK(key.data + key.size <= data + size);
  const auto d = idem_fuzz::decode_all(reinterpret_cast<const unsigned char*>(key.data), key.size);
  FUZZ_CHECK(d.ok);
  FUZZ_CHECK(!d.cps.empty() && d.cps.size() <= idem::core::max_key_length);
  FUZZ_CHECK(!idem_fuzz::oracle_white_space(d.cps.front()));
  FUZZ_CHECK(!idem_fuzz::oracle_white_space(d.cps.back()));
  for (char32_t c : d.cps) FUZZ_CHECK(!oracle_control(c));

  // Idempotent: the key parses to itself, same bytes at the same address.
  Slice again{};
  const Outcome o = capture([&] { again = idem::core::parse_key(key); });
  FUZZ_CHECK(!o.threw);
  FUZZ_CHECK(again.data == key.data && again.size == key.size);
}

}  // namespace

// libFuzzer entry point: one raw key per input.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const char* data = reinterpret_cast<const char*>(bytes);
  Slice result{};
  const Outcome o = capture([&] { result = idem::core::parse_key(Slice{data, size}); });

  const auto d = idem_fuzz::decode_all(bytes, size);
  if (!d.ok) {
    FUZZ_CHECK(o.threw);
    FUZZ_CHECK(o.sqlstate == idem::core::sqlstate::character_not_in_repertoire);
    FUZZ_CHECK(o.detail == "Malformed byte sequence at byte offset " + std::to_string(d.bad_at) + ".");
    return 0;
  }

  // Model: first and last non-white-space code points.
  std::size_t first = d.cps.size(), last = 0;
  for (std::size_t k = 0; k < d.cps.size(); ++k)
    if (!idem_fuzz::oracle_white_space(d.cps[k])) {
      if (first == d.cps.size()) first = k;
      last = k;
    }
  if (first == d.cps.size()) {
    FUZZ_CHECK(o.threw && o.sqlstate == idem::core::sqlstate::invalid_parameter_value);
    FUZZ_CHECK(contains(o.detail, "blank"));
    return 0;
  }
  const std::size_t length = last - first + 1;
  if (length > idem::core::max_key_length) {
    FUZZ_CHECK(o.threw && o.sqlstate == idem::core::sqlstate::invalid_parameter_value);
    FUZZ_CHECK(contains(o.detail, "The key is " + std::to_string(length) + " characters long"));
    return 0;
  }
  for (std::size_t k = first; k <= last; ++k)
    if (oracle_control(d.cps[k])) {
      FUZZ_CHECK(o.threw && o.sqlstate == idem::core::sqlstate::invalid_parameter_value);
      FUZZ_CHECK(contains(o.detail, "control character " + idem_fuzz::oracle_code_point_name(d.cps[k]) +
                                        " at position " + std::to_string(k - first + 1) + "."));
      return 0;
    }

  FUZZ_CHECK(!o.threw);
  FUZZ_CHECK(result.data == data + d.offsets[first]);
  FUZZ_CHECK(result.size == d.offsets[last + 1] - d.offsets[first]);
  check_returned_key(data, size, result);
  return 0;
}
