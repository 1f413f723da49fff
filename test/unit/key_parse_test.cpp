// key_parse_test.cpp: parse_key trimming, blank, length and control-character rules.
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "core/key.hpp"
#include "support.hpp"

using idem::core::parse_key;
using idem::core::Slice;
using idem_test::sl;

namespace {

const std::string kNbsp = "\xC2\xA0";           // U+00A0
const std::string kNel = "\xC2\x85";            // U+0085
const std::string kIdeoSpace = "\xE3\x80\x80";  // U+3000
const std::string kZwsp = "\xE2\x80\x8B";       // U+200B, not White_Space
const std::string kEAcute = "\xC3\xA9";         // é
const std::string kEmoji = "\xF0\x9F\x98\x80";  // 😀

std::string repeat(const std::string& s, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

// The 25 White_Space code points, UTF-8 encoded.
std::string all_white_space() {
  return "\t\n\v\f\r " + kNel + kNbsp + "\xE1\x9A\x80" +
         "\xE2\x80\x80\xE2\x80\x81\xE2\x80\x82\xE2\x80\x83\xE2\x80\x84\xE2\x80\x85"
         "\xE2\x80\x86\xE2\x80\x87\xE2\x80\x88\xE2\x80\x89\xE2\x80\x8A"
         "\xE2\x80\xA8\xE2\x80\xA9\xE2\x80\xAF\xE2\x81\x9F" +
         kIdeoSpace;
}

// Expects raw to parse to the sub-slice [offset, offset + size) of raw itself.
void expect_trimmed(const std::string& raw, std::size_t offset, std::size_t size) {
  SCOPED_TRACE("raw key of " + std::to_string(raw.size()) + " bytes");
  const Slice key = parse_key(sl(raw));
  EXPECT_EQ(key.data, raw.data() + offset) << "must be a sub-slice of the input";
  EXPECT_EQ(key.size, size);
}

void expect_invalid_key(const std::string& raw, const std::string& detail) {
  SCOPED_TRACE("raw key of " + std::to_string(raw.size()) + " bytes");
  const auto e = EXPECT_CORE_ERROR(parse_key(sl(raw)));
  EXPECT_STREQ(e.sqlstate(), "22023");
  EXPECT_EQ(e.message(), "invalid idempotency key");
  EXPECT_EQ(e.detail(), detail);
}

const char kBlank[] = "The key is blank: it is empty or only white space.";

std::string too_long(std::size_t n) {
  return "The key is " + std::to_string(n) + " characters long after trimming; the limit is 255.";
}

std::string control_at(const char* cp, std::size_t pos) {
  return std::string("The key contains control character ") + cp + " at position " +
         std::to_string(pos) + ".";
}

}  // namespace

// ---- Trimming ------------------------------------------------------------------
TEST(ParseKey, UntrimmedKeyIsReturnedAsIs) { expect_trimmed("order-42", 0, 8); }

TEST(ParseKey, TrimsAsciiWhiteSpace) {
  expect_trimmed("  abc  ", 2, 3);
  expect_trimmed("\t\n\v\f\r abc \r\n", 6, 3);
  expect_trimmed("abc\n", 0, 3);  // a trailing newline is trimmed, not a control character
  expect_trimmed("\r\nabc", 2, 3);
}

TEST(ParseKey, TrimsUnicodeWhiteSpace) {
  expect_trimmed(kNbsp + "key" + kIdeoSpace, 2, 3);
  expect_trimmed(kIdeoSpace + kIdeoSpace + "key" + kNbsp, 6, 3);
  expect_trimmed(kNel + "key" + kNel, 2, 3);  // U+0085 is White_Space
}

TEST(ParseKey, TrimsAll25WhiteSpaceCodePoints) {
  const std::string ws = all_white_space();
  ASSERT_EQ(ws.size(), 6u + 2 + 2 + 3 + 11 * 3 + 4 * 3 + 3);
  expect_trimmed(ws + kEAcute + ws, ws.size(), 2);
}

TEST(ParseKey, KeepsInnerWhiteSpace) {
  expect_trimmed("  a b  ", 2, 3);
  expect_trimmed(" a" + kIdeoSpace + "b" + kNbsp + "c ", 1, 1 + 3 + 1 + 2 + 1);
  expect_trimmed("a" + kNel + "b", 0, 4);  // inner U+0085 is neither trimmed nor a control
}

TEST(ParseKey, ZeroWidthSpaceIsNotTrimmed) {
  expect_trimmed(kZwsp + "a" + kZwsp, 0, 7);
  expect_trimmed(" " + kZwsp + " ", 1, 3);  // and is not blank either
}

TEST(ParseKey, TrimmingKeepsNonAsciiEdges) {
  expect_trimmed(" " + kEmoji + "x" + kEAcute + " ", 1, 7);
}

// ---- Blank -----------------------------------------------------------------------
TEST(ParseKey, RejectsBlank) {
  expect_invalid_key("", kBlank);
  expect_invalid_key("   ", kBlank);
  expect_invalid_key("\t\n", kBlank);
  expect_invalid_key(kIdeoSpace, kBlank);
  expect_invalid_key(kNbsp + " " + kNel, kBlank);
  expect_invalid_key(all_white_space(), kBlank);
}

TEST(ParseKey, RejectsNullDataWithZeroSizeAsBlank) {
  const auto e = EXPECT_CORE_ERROR(parse_key({nullptr, 0}));
  EXPECT_STREQ(e.sqlstate(), "22023");
  EXPECT_EQ(e.detail(), kBlank);
}

// ---- Length --------------------------------------------------------------------------
TEST(ParseKey, Accepts255Characters) {
  expect_trimmed(std::string(255, 'k'), 0, 255);
  expect_trimmed("   " + std::string(255, 'k') + "   ", 3, 255);  // counted after trimming
}

TEST(ParseKey, Rejects256Characters) {
  expect_invalid_key(std::string(256, 'k'), too_long(256));
  expect_invalid_key(std::string(1000, 'k'), too_long(1000));
  expect_invalid_key(std::string(254, 'k') + " " + "kk", too_long(257));  // inner space counts
}

TEST(ParseKey, LimitCountsCharactersNotBytes) {
  const std::string ok = repeat(kEAcute, 255);
  ASSERT_EQ(ok.size(), 510u);
  expect_trimmed(ok, 0, 510);
  expect_invalid_key(repeat(kEAcute, 256), too_long(256));
}

TEST(ParseKey, Accepts255EmojiAndRejects256) {
  expect_trimmed(repeat(kEmoji, 255), 0, 1020);
  expect_invalid_key(repeat(kEmoji, 256), too_long(256));
}

TEST(ParseKey, LengthIsCheckedBeforeControlCharacters) {
  expect_invalid_key("\x01" + std::string(300, 'k'), too_long(301));
}

// ---- Control characters ------------------------------------------------------------------
TEST(ParseKey, RejectsNulWithPosition) {
  expect_invalid_key(std::string("a\0b", 3), control_at("U+0000", 2));
  expect_invalid_key(std::string("\0", 1), control_at("U+0000", 1));
}

TEST(ParseKey, RejectsU001FAndU007FWithPosition) {
  expect_invalid_key("ab\x1F", control_at("U+001F", 3));
  expect_invalid_key("\x7F", control_at("U+007F", 1));
  expect_invalid_key("\x01" "abc", control_at("U+0001", 1));
}

TEST(ParseKey, InnerTabAndNewlineAreControlCharacters) {
  expect_invalid_key("a\tb", control_at("U+0009", 2));
  expect_invalid_key(" line1\nline2 ", control_at("U+000A", 6));
}

TEST(ParseKey, PositionCountsCharactersAfterTrimming) {
  expect_invalid_key("  a\x01", control_at("U+0001", 2));
  expect_invalid_key(kIdeoSpace + kEAcute + kEmoji + "\x1B", control_at("U+001B", 3));
}

TEST(ParseKey, ReportsTheFirstControlCharacter) {
  expect_invalid_key("a\x02\x03\x7F", control_at("U+0002", 2));
}

TEST(ParseKey, C1ControlsAreAccepted) {
  // The rule is below U+0020 or U+007F only; U+0080..U+009F pass (U+0085 is trimmed at the ends).
  expect_trimmed("a\xC2\x9B" "b", 0, 4);  // U+009B
  expect_trimmed("\xC2\x80", 0, 2);       // U+0080
  expect_trimmed("\xC2\x9F", 0, 2);       // U+009F
  expect_trimmed("x\xC2\x84", 0, 3);      // U+0084
}

// ---- Malformed input ----------------------------------------------------------------------
TEST(ParseKey, MalformedUtf8Is22021WithOffsetInTheRawInput) {
  struct Case {
    std::string raw;
    int at;
  };
  for (const Case& c : {Case{"abc\xFF", 3}, Case{"  \xC3", 2}, Case{"a\xED\xA0\x80" "b", 1},
                        Case{"\xC0\x80", 0}}) {
    const std::string& raw = c.raw;
    const int at = c.at;
    SCOPED_TRACE(at);
    const auto e = EXPECT_CORE_ERROR(parse_key(sl(raw)));
    EXPECT_STREQ(e.sqlstate(), "22021");
    EXPECT_EQ(e.message(), "invalid UTF-8 in idempotency input");
    EXPECT_EQ(e.detail(), "Malformed byte sequence at byte offset " + std::to_string(at) + ".");
  }
}
