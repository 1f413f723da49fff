// namespace_test.cpp: the consumer namespace rule (1-64 characters of a-z 0-9 - _).
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "core/namespace.hpp"
#include "support.hpp"

using idem::core::validate_namespace;
using idem_test::sl;

namespace {

const std::string kAlphabetRule =
    " is not allowed; use only lower-case a-z, digits 0-9, \"-\" and \"_\".";

// Expects ns to be rejected with 22023 and exactly this detail.
void expect_rejected(const std::string& ns, const std::string& detail) {
  SCOPED_TRACE("namespace of " + std::to_string(ns.size()) + " bytes");
  const auto e = EXPECT_CORE_ERROR(validate_namespace(sl(ns)));
  EXPECT_STREQ(e.sqlstate(), "22023");
  EXPECT_EQ(e.message(), "invalid idempotency namespace");
  EXPECT_EQ(e.detail(), detail);
}

}  // namespace

TEST(Namespace, Accepts) {
  for (const std::string ns : {"a", "payments", "a-b_c9", "0", "-", "_", "--", "9lives",
                               "abcdefghijklmnopqrstuvwxyz0123456789-_"}) {
    EXPECT_NO_THROW(validate_namespace(sl(ns))) << ns;
  }
}

TEST(Namespace, AcceptsExactly64Characters) {
  EXPECT_NO_THROW(validate_namespace(sl(std::string(64, 'a'))));
  EXPECT_NO_THROW(validate_namespace(sl(std::string(63, 'z') + "_")));
}

TEST(Namespace, RejectsEmpty) {
  expect_rejected("", "The namespace is empty; it must be 1 to 64 characters.");
  const auto e = EXPECT_CORE_ERROR(validate_namespace({nullptr, 0}));
  EXPECT_EQ(e.detail(), "The namespace is empty; it must be 1 to 64 characters.");
}

TEST(Namespace, Rejects65Characters) {
  expect_rejected(std::string(65, 'a'), "The namespace is 65 characters long; the limit is 64.");
  expect_rejected(std::string(1000, 'x'),
                  "The namespace is 1000 characters long; the limit is 64.");
}

TEST(Namespace, RejectsUpperCaseNamingCharacterAndPosition) {
  expect_rejected("Foo", "Character \"F\" at position 1" + kAlphabetRule);
  expect_rejected("fooBar", "Character \"B\" at position 4" + kAlphabetRule);
}

TEST(Namespace, RejectsSpaceAsCodePoint) {
  expect_rejected("a b", "Character U+0020 at position 2" + kAlphabetRule);
}

TEST(Namespace, RejectsNonAsciiAsCodePoint) {
  expect_rejected("\xC3\xA9", "Character U+00E9 at position 1" + kAlphabetRule);
  expect_rejected("ab\xF0\x9F\x98\x80", "Character U+1F600 at position 3" + kAlphabetRule);
}

TEST(Namespace, RejectsControlCharactersAsCodePoint) {
  expect_rejected("a\x01", "Character U+0001 at position 2" + kAlphabetRule);
  expect_rejected("\t", "Character U+0009 at position 1" + kAlphabetRule);
  expect_rejected("a\x7F", "Character U+007F at position 2" + kAlphabetRule);
  expect_rejected(std::string("a\0b", 3), "Character U+0000 at position 2" + kAlphabetRule);
}

TEST(Namespace, RejectsPunctuation) {
  expect_rejected("a.b", "Character \".\" at position 2" + kAlphabetRule);
  expect_rejected("a/b", "Character \"/\" at position 2" + kAlphabetRule);
  expect_rejected("~", "Character \"~\" at position 1" + kAlphabetRule);
}

TEST(Namespace, DoubleQuoteIsReportedAsCodePoint) {
  // Quoting '"' itself would read as """.
  expect_rejected("a\"b", "Character U+0022 at position 2" + kAlphabetRule);
}

TEST(Namespace, ReportsTheFirstBadCharacter) {
  expect_rejected("ab.C d", "Character \".\" at position 3" + kAlphabetRule);
}

TEST(Namespace, AlphabetIsCheckedBeforeLength) {
  // A too-long namespace with a bad character reports the character.
  expect_rejected(std::string(70, 'a') + "A", "Character \"A\" at position 71" + kAlphabetRule);
}

TEST(Namespace, MalformedUtf8Is22021) {
  const std::string ns = "ab\xFF";
  const auto e = EXPECT_CORE_ERROR(validate_namespace(sl(ns)));
  EXPECT_STREQ(e.sqlstate(), "22021");
  EXPECT_EQ(e.message(), "invalid UTF-8 in idempotency input");
  EXPECT_EQ(e.detail(), "Malformed byte sequence at byte offset 2.");
}
