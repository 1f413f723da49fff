// fuzz_mint_key.cpp: libFuzzer target for idem::core::mint_key.
//
// Input layout: an empty input means zero parts. Otherwise byte 0 is a flag
// byte (bit 7 set: part number (byte & 0x0F) + 1 is a SQL NULL, when there is
// such a part) and the remaining bytes, split at every NUL byte, are the parts
// (so "\x00ab\x00c" is ["ab", "c"]; PostgreSQL text never holds NUL anyway).
//
// Properties checked on every input:
//  - all parts well-formed UTF-8: the outcome is exactly what the rules say:
//    22023 for no parts, and for the first part that is NULL, empty or only
//    White_Space, with a detail naming that 1-based part; otherwise 64
//    lower-case hex digits and a NUL, equal to an oracle that builds the
//    length-prefixed encoding by hand and hashes it with OpenSSL's one-shot
//    SHA256();
//  - a part with malformed UTF-8: mint_key may throw 22021 or 22023 (it
//    decodes a part only as far as its blank check needs, since PostgreSQL
//    validates text before the core sees it), but a key it returns is still
//    the oracle's;
//  - minting the same parts again gives the same key;
//  - part lists that differ but join to the same bytes (a byte moved across a
//    boundary, two parts merged) or extend the list give different keys.
#include <openssl/sha.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/key.hpp"
#include "fuzz_support.hpp"

using idem::core::Slice;
using idem_fuzz::capture;
using idem_fuzz::Outcome;

namespace {

// One part as the fuzz input describes it.
struct Part {
  bool null = false;
  std::string bytes;
};

// Test oracle: the specified encoding written out directly (4-byte big-endian
// count, then per part a 4-byte big-endian byte length and the bytes), hashed
// with OpenSSL's one-shot SHA256() and printed as lower-case hex.
std::string oracle_key(const std::vector<Part>& parts) {
  std::vector<unsigned char> enc;
  auto be32 = [&enc](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) enc.push_back(static_cast<unsigned char>(v >> shift));
  };
  be32(static_cast<std::uint32_t>(parts.size()));
  for (const Part& p : parts) {
    be32(static_cast<std::uint32_t>(p.bytes.size()));
    enc.insert(enc.end(), p.bytes.begin(), p.bytes.end());
  }
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(enc.data(), enc.size(), md);
  std::string hex;
  char two[3];
  for (unsigned char b : md) {
    std::snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  return hex;
}

// Result of one mint_key call: the outcome and, when it returned, the key.
struct Minted {
  Outcome outcome;
  std::string key;
};

// Calls mint_key on parts and checks the output buffer's shape: exactly 64
// lower-case hex digits, a NUL, and nothing written past it.
Minted mint(const std::vector<Part>& parts) {
  std::vector<Slice> slices;
  for (const Part& p : parts)
    slices.push_back(p.null ? Slice{nullptr, 0} : Slice{p.bytes.data(), p.bytes.size()});
  char out[idem::core::minted_key_length + 2];
  std::memset(out, '#', sizeof out);
  Minted m;
  m.outcome = capture([&] { idem::core::mint_key(slices.data(), slices.size(), out); });
  if (!m.outcome.threw) {
    for (std::size_t i = 0; i < idem::core::minted_key_length; ++i)
      FUZZ_CHECK((out[i] >= '0' && out[i] <= '9') || (out[i] >= 'a' && out[i] <= 'f'));
    FUZZ_CHECK(out[idem::core::minted_key_length] == '\0');
    FUZZ_CHECK(out[idem::core::minted_key_length + 1] == '#');
    m.key.assign(out, idem::core::minted_key_length);
  }
  return m;
}

// Whether a part's text is only White_Space, by the oracle decoder (the part
// is well-formed UTF-8).
bool oracle_blank(const std::string& bytes) {
  for (char32_t c : idem_fuzz::decode_all(bytes).cps)
    if (!idem_fuzz::oracle_white_space(c)) return false;
  return true;
}

// Mints parts (NULL parts included) and checks the outcome against the rules;
// returns what mint() returned.
Minted check_against_model(const std::vector<Part>& parts) {
  const Minted m = mint(parts);
  const Outcome& o = m.outcome;

  bool all_well_formed = true;
  for (const Part& p : parts)
    if (!p.null && !idem_fuzz::decode_all(p.bytes).ok) all_well_formed = false;

  if (!all_well_formed) {
    // Lenient by contract, but never a wrong key and never a foreign SQLSTATE.
    if (o.threw)
      FUZZ_CHECK(o.sqlstate == idem::core::sqlstate::character_not_in_repertoire ||
                 o.sqlstate == idem::core::sqlstate::invalid_parameter_value);
    else
      FUZZ_CHECK(m.key == oracle_key(parts));
    return m;
  }

  if (parts.empty()) {
    FUZZ_CHECK(o.threw && o.sqlstate == idem::core::sqlstate::invalid_parameter_value);
    return m;
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const char* why = nullptr;
    if (parts[i].null)
      why = "null";
    else if (parts[i].bytes.empty())
      why = "empty";
    else if (oracle_blank(parts[i].bytes))
      why = "blank (only white space)";
    if (why != nullptr) {
      FUZZ_CHECK(o.threw && o.sqlstate == idem::core::sqlstate::invalid_parameter_value);
      FUZZ_CHECK(o.detail == "Part " + std::to_string(i + 1) + " is " + why + ".");
      return m;
    }
  }
  FUZZ_CHECK(!o.threw);
  FUZZ_CHECK(m.key == oracle_key(parts));
  return m;
}

// Splits the fuzz input into parts as the header comment describes.
std::vector<Part> parts_of(const std::uint8_t* data, std::size_t size) {
  std::vector<Part> parts;
  if (size == 0) return parts;
  const std::uint8_t flags = data[0];
  parts.emplace_back();
  for (std::size_t i = 1; i < size; ++i) {
    if (data[i] == 0)
      parts.emplace_back();
    else
      parts.back().bytes += static_cast<char>(data[i]);
  }
  if ((flags & 0x80) != 0) {
    const std::size_t n = flags & 0x0F;
    if (n < parts.size()) parts[n].null = true, parts[n].bytes.clear();
  }
  return parts;
}

// Asserts that two different part lists do not mint the same key.
void check_distinct(const Minted& a, const std::vector<Part>& other_parts) {
  const Minted b = check_against_model(other_parts);
  if (!a.outcome.threw && !b.outcome.threw) FUZZ_CHECK(a.key != b.key);
}

}  // namespace

// libFuzzer entry point: one part list per input.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<Part> parts = parts_of(data, size);
  const Minted first = check_against_model(parts);

  // Deterministic: the same parts again give the same outcome.
  const Minted second = mint(parts);
  FUZZ_CHECK(first.outcome.threw == second.outcome.threw);
  FUZZ_CHECK(first.outcome.sqlstate == second.outcome.sqlstate);
  FUZZ_CHECK(first.key == second.key);

  if (parts.size() >= 2 && !parts[0].null && !parts[1].null) {
    // Same joined bytes, boundary moved: ["ab","c"] vs ["a","bc"].
    if (parts[0].bytes.size() >= 2) {
      std::vector<Part> moved = parts;
      moved[1].bytes.insert(moved[1].bytes.begin(), moved[0].bytes.back());
      moved[0].bytes.pop_back();
      check_distinct(first, moved);
    }
    // Same joined bytes, one part fewer: ["ab","c"] vs ["abc"].
    std::vector<Part> merged = parts;
    merged[0].bytes += merged[1].bytes;
    merged.erase(merged.begin() + 1);
    check_distinct(first, merged);
  }
  // One part more: [...] vs [..., "x"].
  std::vector<Part> longer = parts;
  longer.push_back(Part{false, "x"});
  check_distinct(first, longer);
  return 0;
}
