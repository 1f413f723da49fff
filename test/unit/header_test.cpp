// header_test.cpp: header_key, the Idempotency-Key field as the IETF draft
// defines it (an sf-string) and as Stripe-style APIs send it (a bare value).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/header.hpp"
#include "support.hpp"

using idem::core::header_key;
using idem::core::Slice;

namespace {

// The key header_key finds in header, as a string.
std::string key_of(const std::string& header) {
  std::vector<char> buffer(header.size() + 1);
  const Slice key = header_key(Slice{header.data(), header.size()}, buffer.data());
  return std::string(key.data, key.size);
}

// The detail of the error header_key raises for header.
std::string error_of(const std::string& header) {
  const idem::core::Error e = EXPECT_CORE_ERROR(key_of(header));
  EXPECT_STREQ(e.sqlstate(), "22023");
  EXPECT_EQ(e.message(), "invalid idempotency key");
  return e.detail();
}

const std::string kNotString = "The Idempotency-Key field is not a Structured Field String: ";

}  // namespace

// The draft's example, quoted as it specifies and bare as Stripe-style
// clients send it: one key.
TEST(HeaderKey, DraftExampleQuotedAndBareAreOneKey) {
  EXPECT_EQ(key_of("\"8e03978e-40d5-43e8-bc93-6894a57f9324\""), "8e03978e-40d5-43e8-bc93-6894a57f9324");
  EXPECT_EQ(key_of("8e03978e-40d5-43e8-bc93-6894a57f9324"), "8e03978e-40d5-43e8-bc93-6894a57f9324");
}

TEST(HeaderKey, WhiteSpaceAroundTheStringIsNotPartOfIt) {
  EXPECT_EQ(key_of(" \t\"abc\" \t"), "abc");
  // Inside the quotes it is, and the key rules then trim it, as for a bare key.
  EXPECT_EQ(key_of("\"  abc  \""), "abc");
  EXPECT_EQ(key_of("  abc  "), "abc");
}

TEST(HeaderKey, EscapesAreUnescaped) {
  EXPECT_EQ(key_of("\"a\\\"b\""), "a\"b");
  EXPECT_EQ(key_of("\"a\\\\b\""), "a\\b");
  EXPECT_EQ(key_of("\"\\\\\\\"\""), "\\\"");
}

TEST(HeaderKey, EveryPrintableAsciiCharacterIsAllowed) {
  std::string quoted = "\"", expected;
  for (char c = 0x21; c <= 0x7E; ++c) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
    expected += c;
  }
  EXPECT_EQ(key_of(quoted + "\""), expected);
}

TEST(HeaderKey, UnterminatedString) {
  EXPECT_EQ(error_of("\"abc"), kNotString + "the closing double quote is missing.");
  EXPECT_EQ(error_of("\""), kNotString + "the closing double quote is missing.");
  EXPECT_EQ(error_of("\"abc\\\""), kNotString + "the closing double quote is missing.");
}

TEST(HeaderKey, BadEscape) {
  EXPECT_EQ(error_of("\"a\\nb\""), kNotString + "only \\\" and \\\\ are escapes; the backslash at byte 3.");
  EXPECT_EQ(error_of("\"ab\\"), kNotString + "only \\\" and \\\\ are escapes; the backslash at byte 4.");
}

TEST(HeaderKey, CharactersOutsidePrintableAscii) {
  EXPECT_EQ(error_of("\"a\tb\""), kNotString + "a string holds only printable ASCII (0x20 to 0x7E), not byte 0x09 at byte 3.");
  EXPECT_EQ(error_of("\"\x7F\""), kNotString + "a string holds only printable ASCII (0x20 to 0x7E), not byte 0x7F at byte 2.");
  EXPECT_EQ(error_of("\"caf\xC3\xA9\""), kNotString + "a string holds only printable ASCII (0x20 to 0x7E), not byte 0xC3 at byte 5.");
}

TEST(HeaderKey, NothingButWhiteSpaceAfterTheString) {
  EXPECT_EQ(error_of("\"abc\"x"), kNotString + "something follows the closing double quote, at byte 6.");
  EXPECT_EQ(error_of("\"abc\" \"def\""), kNotString + "something follows the closing double quote, at byte 7.");
  // A proxy joins duplicate fields with commas.
  EXPECT_EQ(error_of("\"abc\", \"abc\""),
            kNotString + "it holds more than one value (a list, as when duplicate fields are joined), at byte 6.");
  // The draft defines no parameters.
  EXPECT_EQ(error_of("\"abc\";v=1"), kNotString + "parameters are not defined for Idempotency-Key, at byte 6.");
}

TEST(HeaderKey, TheKeyRulesApplyInsideTheQuotes) {
  EXPECT_EQ(error_of("\"\""), "The key is blank: it is empty or only white space.");
  EXPECT_EQ(error_of("\"   \""), "The key is blank: it is empty or only white space.");
  EXPECT_EQ(key_of("\"" + std::string(255, 'k') + "\""), std::string(255, 'k'));
  EXPECT_EQ(error_of("\"" + std::string(256, 'k') + "\""), "The key is 256 characters long after trimming; the limit is 255.");
}

// Only a leading double quote makes a value an sf-string: tokens, byte
// sequences and anything else are bare keys, taken literally.
TEST(HeaderKey, OtherItemTypesAreBareKeys) {
  EXPECT_EQ(key_of("abc-123"), "abc-123");
  EXPECT_EQ(key_of(":YWJj:"), ":YWJj:");
  EXPECT_EQ(key_of("abc;v=1"), "abc;v=1");
  EXPECT_EQ(key_of("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(error_of("a\x01z"), "The key contains control character U+0001 at position 2.");
  EXPECT_EQ(error_of(""), "The key is blank: it is empty or only white space.");
}

// A bare value may hold neither a comma nor a double quote: a proxy that
// joins a repeated field sends "k, k", which must not become a new key
// "k, k" (a retry would answer fresh), and a value with a quote that does
// not start it (after a no-break space, say) is no key either.
TEST(HeaderKey, BareValuesHoldNoListAndNoQuote) {
  const std::string list = "A bare Idempotency-Key value (one not in double quotes) cannot hold a comma: ";
  EXPECT_EQ(error_of("8e03978e, 8e03978e"),
            list + "it holds more than one value (a list, as when duplicate fields are joined), at byte 9.");
  EXPECT_EQ(error_of("a,b"), list + "it holds more than one value (a list, as when duplicate fields are joined), at byte 2.");
  EXPECT_EQ(error_of("a\"b"), "A bare Idempotency-Key value (one not in double quotes) cannot hold a double quote, at "
                              "byte 2; a quoted key starts with one.");
  EXPECT_EQ(error_of("\xC2\xA0\"abc\""), "A bare Idempotency-Key value (one not in double quotes) cannot hold a double "
                                        "quote, at byte 3; a quoted key starts with one.");
}
