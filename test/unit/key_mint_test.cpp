// key_mint_test.cpp: mint_key's length-prefixed SHA-256 encoding and its part rules.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/hex.hpp"
#include "core/key.hpp"
#include "core/sha256.hpp"
#include "support.hpp"

using idem::core::mint_key;
using idem::core::minted_key_length;
using idem::core::Slice;
using idem_test::sl;

namespace {

std::string mint(const std::vector<Slice>& parts) {
  char out[minted_key_length + 1];
  mint_key(parts.data(), parts.size(), out);
  return std::string(out);
}

std::string mint(const std::vector<std::string>& parts) {
  std::vector<Slice> slices;
  for (const auto& p : parts) slices.push_back(sl(p));
  return mint(slices);
}

// The encoding written out by hand: be32(count), then be32(size) and bytes per part.
std::string expected_key(const std::vector<std::string>& parts) {
  std::string bytes;
  auto be32 = [&bytes](std::uint32_t v) {
    bytes += static_cast<char>(v >> 24);
    bytes += static_cast<char>(v >> 16);
    bytes += static_cast<char>(v >> 8);
    bytes += static_cast<char>(v);
  };
  be32(static_cast<std::uint32_t>(parts.size()));
  for (const auto& p : parts) {
    be32(static_cast<std::uint32_t>(p.size()));
    bytes += p;
  }
  const auto d = idem::core::Sha256::of(bytes.data(), bytes.size());
  char out[65];
  idem::core::to_hex(d.data(), d.size(), out);
  return out;
}

void expect_bad_part(const std::vector<Slice>& parts, const std::string& detail) {
  char out[minted_key_length + 1];
  const auto e = EXPECT_CORE_ERROR(mint_key(parts.data(), parts.size(), out));
  EXPECT_STREQ(e.sqlstate(), "22023");
  EXPECT_EQ(e.message(), "invalid idempotency key part");
  EXPECT_EQ(e.detail(), detail);
}

const Slice kNull{nullptr, 0};
const std::string kIdeoSpace = "\xE3\x80\x80";  // U+3000

}  // namespace

// ---- The encoding ----------------------------------------------------------------
TEST(MintKey, KnownValue) {
  // Bytes 00000001 00000001 61, hashed; the same value is in test/kat/vectors.csv.
  EXPECT_EQ(mint(std::vector<std::string>{"a"}),
            "d6763a78f2ada70dc4816b3f3a68cdb7723a3970a1d84af66b2bb9e96fe4cc8b");
  EXPECT_EQ(expected_key({"a"}), "d6763a78f2ada70dc4816b3f3a68cdb7723a3970a1d84af66b2bb9e96fe4cc8b");
}

TEST(MintKey, MatchesTheHandWrittenEncoding) {
  const std::vector<std::vector<std::string>> cases = {
      {"a"},
      {"tenant-7", "order", "42"},
      {"\xC3\xA9"},
      {"\xF0\x9F\x98\x80", "x"},
      {std::string("a\0b", 3)},         // embedded NUL is hashed as a byte
      {std::string(300, 'x')},          // length 0x0000012C
      {std::string(70000, 'y'), "z"},   // length 0x00011170
  };
  for (const auto& parts : cases) {
    SCOPED_TRACE(parts.front().substr(0, 16));
    EXPECT_EQ(mint(parts), expected_key(parts));
  }
}

TEST(MintKey, OutputIs64LowerCaseHexDigitsAndNul) {
  char out[minted_key_length + 2];
  std::memset(out, 'X', sizeof out);
  const Slice part = {"payments", 8};
  mint_key(&part, 1, out);
  EXPECT_EQ(out[64], '\0');
  EXPECT_EQ(out[65], 'X') << "mint_key wrote past its NUL";
  for (int i = 0; i < 64; ++i)
    EXPECT_TRUE((out[i] >= '0' && out[i] <= '9') || (out[i] >= 'a' && out[i] <= 'f'))
        << "character " << i << " is '" << out[i] << "'";
}

TEST(MintKey, Deterministic) {
  const std::vector<std::string> parts = {"tenant", "invoice", "2024-01"};
  EXPECT_EQ(mint(parts), mint(parts));
}

TEST(MintKey, OrderMatters) {
  EXPECT_NE(mint(std::vector<std::string>{"ab", "c"}), mint(std::vector<std::string>{"c", "ab"}));
}

TEST(MintKey, PartBoundariesMatter) {
  EXPECT_NE(mint(std::vector<std::string>{"ab", "c"}), mint(std::vector<std::string>{"a", "bc"}));
  EXPECT_NE(mint(std::vector<std::string>{"a", "b"}), mint(std::vector<std::string>{"a.b"}));
  EXPECT_NE(mint(std::vector<std::string>{"a"}), mint(std::vector<std::string>{"a", "a"}));
  EXPECT_NE(mint(std::vector<std::string>{"aa"}), mint(std::vector<std::string>{"a", "a"}));
}

TEST(MintKey, PartsAreNotTrimmed) {
  const std::string spaced = mint(std::vector<std::string>{" a b "});
  EXPECT_NE(spaced, mint(std::vector<std::string>{"a b"}));
  EXPECT_EQ(spaced, expected_key({" a b "}));
  EXPECT_NE(mint(std::vector<std::string>{kIdeoSpace + "a"}), mint(std::vector<std::string>{"a"}));
}

TEST(MintKey, ControlCharactersAndZeroWidthSpaceAreAllowedInParts) {
  EXPECT_EQ(mint(std::vector<std::string>{"a\x01" "b"}), expected_key({"a\x01" "b"}));
  EXPECT_EQ(mint(std::vector<std::string>{"\xE2\x80\x8B"}), expected_key({"\xE2\x80\x8B"}));
}

// ---- Errors -------------------------------------------------------------------------
TEST(MintKey, RejectsZeroParts) {
  char out[minted_key_length + 1];
  const auto e = EXPECT_CORE_ERROR(mint_key(nullptr, 0, out));
  EXPECT_STREQ(e.sqlstate(), "22023");
  EXPECT_EQ(e.message(), "cannot mint an idempotency key from no parts");
  EXPECT_EQ(e.detail(), "Pass an array with at least one non-blank part.");
}

TEST(MintKey, RejectsNullPart) {
  expect_bad_part({sl("a"), kNull}, "Part 2 is null.");
  expect_bad_part({kNull}, "Part 1 is null.");
  expect_bad_part({Slice{nullptr, 5}}, "Part 1 is null.");  // null wins over any size
}

TEST(MintKey, RejectsEmptyPart) {
  expect_bad_part({sl("a"), sl("b"), Slice{"", 0}}, "Part 3 is empty.");
  expect_bad_part({Slice{"abc", 0}}, "Part 1 is empty.");
}

TEST(MintKey, RejectsBlankPart) {
  const std::string tab_nl = "\t\n";
  const std::string nbsp_nel = "\xC2\xA0\xC2\x85";
  expect_bad_part({Slice{" ", 1}}, "Part 1 is blank (only white space).");
  expect_bad_part({sl("a"), sl(kIdeoSpace)}, "Part 2 is blank (only white space).");
  expect_bad_part({sl(tab_nl)}, "Part 1 is blank (only white space).");
  expect_bad_part({sl("x"), sl("y"), sl(nbsp_nel)}, "Part 3 is blank (only white space).");
}

TEST(MintKey, ReportsTheFirstOffendingPart) {
  expect_bad_part({sl("ok"), Slice{" ", 1}, kNull, Slice{"", 0}},
                  "Part 2 is blank (only white space).");
  expect_bad_part({sl("ok"), kNull, Slice{" ", 1}}, "Part 2 is null.");
  expect_bad_part({sl("ok"), sl("ok"), Slice{"", 0}, kNull}, "Part 3 is empty.");
}

TEST(MintKey, MalformedUtf8InABlankCheckIs22021) {
  char out[minted_key_length + 1];
  const std::string bad = " \xFF";
  const Slice parts[] = {sl("ok"), sl(bad)};
  const auto e = EXPECT_CORE_ERROR(mint_key(parts, 2, out));
  EXPECT_STREQ(e.sqlstate(), "22021");
  EXPECT_EQ(e.message(), "invalid UTF-8 in idempotency input");
  EXPECT_EQ(e.detail(), "Malformed byte sequence at byte offset 1.");
}

// The 4-byte limits. Both checks fire before any byte beyond the first of a part
// is read, so huge counts and sizes can be passed without the memory behind them.
TEST(MintKey, RejectsMorePartsThanA4ByteCountHolds) {
  if constexpr (sizeof(std::size_t) > 4) {
    char out[minted_key_length + 1];
    const Slice part = {"a", 1};
    const std::size_t count = std::size_t{std::numeric_limits<std::uint32_t>::max()} + 1;
    const auto e = EXPECT_CORE_ERROR(mint_key(&part, count, out));
    EXPECT_STREQ(e.sqlstate(), "22023");
    EXPECT_EQ(e.message(), "invalid idempotency key part");
    EXPECT_EQ(e.detail(), "Part 4294967296 is beyond the 4-byte part count.");
  } else {
    GTEST_SKIP() << "size_t cannot exceed the 4-byte count";
  }
}

TEST(MintKey, RejectsAPartLongerThanA4ByteLengthDescribes) {
  if constexpr (sizeof(std::size_t) > 4) {
    // The blank check stops at the first non-white-space code point, 'a'.
    const std::size_t size = std::size_t{std::numeric_limits<std::uint32_t>::max()} + 1;
    expect_bad_part({sl("ok"), Slice{"a", size}},
                    "Part 2 is longer than a 4-byte length can describe.");
  } else {
    GTEST_SKIP() << "size_t cannot exceed the 4-byte length";
  }
}
