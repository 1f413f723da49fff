// utf8_test.cpp: strict UTF-8 decoding, the White_Space set and U+XXXX formatting.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "support.hpp"

using idem::core::format_code_point;
using idem::core::is_white_space;
using idem::core::next_code_point;

namespace {

// Decodes one code point from the start of s and checks it consumed all of s.
char32_t decode_one(const std::string& s) {
  std::size_t i = 0;
  const char32_t c = next_code_point(s.data(), s.size(), i);
  EXPECT_EQ(i, s.size()) << "a single code point must consume the whole input";
  return c;
}

std::vector<char32_t> decode_all(const std::string& s) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < s.size();) out.push_back(next_code_point(s.data(), s.size(), i));
  return out;
}

std::string formatted(char32_t c) {
  char out[12];
  std::memset(out, 'x', sizeof out);
  format_code_point(c, out);
  return out;
}

// Expects decoding s from byte `at` to fail with 22021 naming byte offset `at`.
void expect_malformed(const std::string& s, std::size_t at = 0) {
  SCOPED_TRACE("input bytes of size " + std::to_string(s.size()) + ", decoding from " +
               std::to_string(at));
  std::size_t i = at;
  const auto e = EXPECT_CORE_ERROR(next_code_point(s.data(), s.size(), i));
  EXPECT_STREQ(e.sqlstate(), "22021");
  EXPECT_EQ(e.message(), "invalid UTF-8 in idempotency input");
  EXPECT_EQ(e.detail(), "Malformed byte sequence at byte offset " + std::to_string(at) + ".");
}

}  // namespace

TEST(Utf8Decode, Ascii) {
  EXPECT_EQ(decode_one("A"), U'A');
  EXPECT_EQ(decode_one("\x7F"), char32_t{0x7F});
  EXPECT_EQ(decode_one(std::string("\0", 1)), char32_t{0});
  EXPECT_EQ(decode_all("abc"), (std::vector<char32_t>{U'a', U'b', U'c'}));
}

TEST(Utf8Decode, TwoByteSequences) {
  EXPECT_EQ(decode_one("\xC2\x80"), char32_t{0x80});   // smallest two-byte
  EXPECT_EQ(decode_one("\xC2\x85"), char32_t{0x85});   // NEL
  EXPECT_EQ(decode_one("\xC3\xA9"), char32_t{0xE9});   // é
  EXPECT_EQ(decode_one("\xDF\xBF"), char32_t{0x7FF});  // largest two-byte
}

TEST(Utf8Decode, ThreeByteSequences) {
  EXPECT_EQ(decode_one("\xE0\xA0\x80"), char32_t{0x800});   // smallest three-byte
  EXPECT_EQ(decode_one("\xE2\x82\xAC"), char32_t{0x20AC});  // €
  EXPECT_EQ(decode_one("\xE3\x80\x80"), char32_t{0x3000});  // ideographic space
  EXPECT_EQ(decode_one("\xED\x9F\xBF"), char32_t{0xD7FF});  // just below the surrogates
  EXPECT_EQ(decode_one("\xEE\x80\x80"), char32_t{0xE000});  // just above the surrogates
  EXPECT_EQ(decode_one("\xEF\xBF\xBD"), char32_t{0xFFFD});  // replacement character
  EXPECT_EQ(decode_one("\xEF\xBF\xBF"), char32_t{0xFFFF});  // largest three-byte
}

TEST(Utf8Decode, FourByteSequences) {
  EXPECT_EQ(decode_one("\xF0\x90\x80\x80"), char32_t{0x10000});   // smallest four-byte
  EXPECT_EQ(decode_one("\xF0\x9F\x98\x80"), char32_t{0x1F600});   // 😀
  EXPECT_EQ(decode_one("\xF4\x8F\xBF\xBF"), char32_t{0x10FFFF});  // largest code point
}

TEST(Utf8Decode, MixedSequenceAdvancesByEncodedLength) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z";  // a é € 😀 z
  std::size_t i = 0;
  EXPECT_EQ(next_code_point(s.data(), s.size(), i), char32_t{'a'});
  EXPECT_EQ(i, 1u);
  EXPECT_EQ(next_code_point(s.data(), s.size(), i), char32_t{0xE9});
  EXPECT_EQ(i, 3u);
  EXPECT_EQ(next_code_point(s.data(), s.size(), i), char32_t{0x20AC});
  EXPECT_EQ(i, 6u);
  EXPECT_EQ(next_code_point(s.data(), s.size(), i), char32_t{0x1F600});
  EXPECT_EQ(i, 10u);
  EXPECT_EQ(next_code_point(s.data(), s.size(), i), char32_t{'z'});
  EXPECT_EQ(i, 11u);
}

TEST(Utf8Decode, EveryScalarValueRoundTrips) {
  // Encode every Unicode scalar value by hand and decode it back.
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    std::string s;
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else if (c < 0x800) {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += static_cast<char>(0xE0 | (c >> 12));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (c >> 18));
      s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
    std::size_t i = 0;
    const char32_t got = next_code_point(s.data(), s.size(), i);
    if (got != c || i != s.size()) {
      ADD_FAILURE() << "U+" << std::hex << static_cast<unsigned>(c) << " decoded as U+"
                    << static_cast<unsigned>(got) << " consuming " << std::dec << i << " bytes";
      return;
    }
  }
}

TEST(Utf8Malformed, Truncated) {
  expect_malformed("\xC3");
  expect_malformed("\xE2\x82");
  expect_malformed("\xE2");
  expect_malformed("\xF0\x9F\x98");
  expect_malformed("\xF0\x9F");
  expect_malformed("\xF0");
  expect_malformed("ab\xC3", 2);  // offset names the lead byte
}

TEST(Utf8Malformed, TruncatedByTheGivenSizeNotByTheBuffer) {
  // The bytes after n exist in memory but are not part of the input.
  const char s[] = "\xC3\xA9";
  std::size_t i = 0;
  const auto e = EXPECT_CORE_ERROR(next_code_point(s, 1, i));
  EXPECT_STREQ(e.sqlstate(), "22021");
  EXPECT_EQ(e.detail(), "Malformed byte sequence at byte offset 0.");
}

TEST(Utf8Malformed, BadContinuationByte) {
  expect_malformed("\xC3\x41");          // ASCII where a continuation belongs
  expect_malformed("\xC3\xC3\xA9");      // a lead byte where a continuation belongs
  expect_malformed("\xE2\x28\xA1");      // bad second byte
  expect_malformed("\xE2\x82\x28");      // bad third byte
  expect_malformed("\xF0\x9F\x98\x41");  // bad fourth byte
  expect_malformed("x\xF0\x41\x98\x80", 1);
}

TEST(Utf8Malformed, Overlong) {
  expect_malformed("\xC0\x80");          // U+0000 in two bytes
  expect_malformed("\xC0\xAF");          // '/' in two bytes
  expect_malformed("\xC1\xBF");          // U+007F in two bytes
  expect_malformed("\xE0\x80\x80");      // U+0000 in three bytes
  expect_malformed("\xE0\x9F\xBF");      // U+07FF in three bytes
  expect_malformed("\xF0\x80\x80\x80");  // U+0000 in four bytes
  expect_malformed("\xF0\x8F\xBF\xBF");  // U+FFFF in four bytes
}

TEST(Utf8Malformed, Surrogates) {
  expect_malformed("\xED\xA0\x80");  // U+D800
  expect_malformed("\xED\xAD\xBF");  // U+DB7F
  expect_malformed("\xED\xB0\x80");  // U+DC00
  expect_malformed("\xED\xBF\xBF");  // U+DFFF
  // A CESU-8 style surrogate pair for U+1F600 is still malformed.
  expect_malformed("\xED\xA0\xBD\xED\xB8\x80");
}

TEST(Utf8Malformed, AboveMaximumCodePoint) {
  expect_malformed("\xF4\x90\x80\x80");  // U+110000
  expect_malformed("\xF5\x80\x80\x80");  // lead byte F5
  expect_malformed("\xF7\xBF\xBF\xBF");  // U+1FFFFF
}

TEST(Utf8Malformed, StrayContinuationByte) {
  expect_malformed("\x80");
  expect_malformed("\xBF");
  expect_malformed("\x80\x80");
  expect_malformed("a\x80", 1);
}

TEST(Utf8Malformed, InvalidLeadBytes) {
  expect_malformed("\xF8\x88\x80\x80\x80");  // five-byte form
  expect_malformed("\xFC\x84\x80\x80\x80\x80");  // six-byte form
  expect_malformed("\xFE");
  expect_malformed("\xFF");
}

TEST(WhiteSpace, All25CodePoints) {
  const char32_t ws[] = {0x0009, 0x000A, 0x000B, 0x000C, 0x000D, 0x0020, 0x0085,
                         0x00A0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                         0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
                         0x2029, 0x202F, 0x205F, 0x3000};
  static_assert(sizeof ws / sizeof ws[0] == 25);
  for (char32_t c : ws) EXPECT_TRUE(is_white_space(c)) << formatted(c);
}

TEST(WhiteSpace, NothingElseInTheWholeCodeSpace) {
  std::size_t count = 0;
  for (char32_t c = 0; c <= 0x10FFFF; ++c)
    if (is_white_space(c)) ++count;
  EXPECT_EQ(count, 25u);
}

TEST(WhiteSpace, NonSpace) {
  const char32_t not_ws[] = {
      0x0000, 0x0008, 0x000E, 0x001F, 0x0021, U'a', 0x007F, 0x0084, 0x0086,
      0x009F, 0x00A1, 0x167F, 0x1681,
      0x180E,  // MONGOLIAN VOWEL SEPARATOR: dropped from White_Space in Unicode 6.3
      0x1FFF,
      0x200B,  // ZERO WIDTH SPACE is not White_Space
      0x200C, 0x200D, 0x2027, 0x202A, 0x202E, 0x2030, 0x205E, 0x2060,
      0x2FFF, 0x3001,
      0xFEFF,  // ZERO WIDTH NO-BREAK SPACE (BOM) is not White_Space
      0x10FFFF, 0x110000, 0xFFFFFFFF};
  for (char32_t c : not_ws) EXPECT_FALSE(is_white_space(c)) << formatted(c);
}

TEST(FormatCodePoint, AtLeastFourUpperCaseHexDigits) {
  EXPECT_EQ(formatted(0x000A), "U+000A");
  EXPECT_EQ(formatted(0x1F600), "U+1F600");
  EXPECT_EQ(formatted(0x0000), "U+0000");
  EXPECT_EQ(formatted(0x00E9), "U+00E9");
  EXPECT_EQ(formatted(0x007F), "U+007F");
  EXPECT_EQ(formatted(0xABCD), "U+ABCD");
  EXPECT_EQ(formatted(0xFFFF), "U+FFFF");
  EXPECT_EQ(formatted(0x10000), "U+10000");
  EXPECT_EQ(formatted(0x10FFFF), "U+10FFFF");
}

TEST(FormatCodePoint, LargestValueFitsTheBuffer) {
  // "U+FFFFFFFF" is 10 characters and a NUL, inside out[12].
  EXPECT_EQ(formatted(0xFFFFFFFF), "U+FFFFFFFF");
}
