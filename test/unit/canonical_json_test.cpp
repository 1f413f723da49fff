// canonical_json_test.cpp: key order, PostgreSQL-style string escaping and 8 KiB buffering of JsonWriter.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/canonical_json.hpp"
#include "core/hex.hpp"
#include "core/sha256.hpp"
#include "support.hpp"

using idem::core::compare_keys;
using idem::core::JsonWriter;
using idem_test::sl;

namespace {

int sign(int v) { return (v > 0) - (v < 0); }

int cmp(const std::string& a, const std::string& b) { return sign(compare_keys(sl(a), sl(b))); }

// A sink that records every block it is handed.
struct Capture {
  std::vector<std::string> blocks;
  static void sink(void* context, const char* data, std::size_t size) {
    static_cast<Capture*>(context)->blocks.emplace_back(data, size);
  }
  std::string text() const {
    std::string all;
    for (const auto& b : blocks) all += b;
    return all;
  }
};

// The text JsonWriter::string writes for s (one string, flushed).
std::string escaped(const std::string& s) {
  Capture cap;
  JsonWriter w(&Capture::sink, &cap);
  w.string(sl(s));
  w.flush();
  return cap.text();
}

// Every block is non-empty and at most 8192 bytes.
void expect_blocks_within_buffer(const Capture& cap) {
  for (std::size_t i = 0; i < cap.blocks.size(); ++i) {
    EXPECT_GT(cap.blocks[i].size(), 0u) << "block " << i;
    EXPECT_LE(cap.blocks[i].size(), 8192u) << "block " << i;
  }
}

const std::string kFffd = "\xEF\xBF\xBD";       // U+FFFD
const std::string kEmoji = "\xF0\x9F\x98\x80";  // U+1F600

}  // namespace

// ---- compare_keys ---------------------------------------------------------------------
TEST(CompareKeys, PrefixSortsFirst) {
  EXPECT_EQ(cmp("a", "aa"), -1);
  EXPECT_EQ(cmp("aa", "ab"), -1);
  EXPECT_EQ(cmp("ab", "b"), -1);
  EXPECT_EQ(cmp("aa", "a"), 1);
  EXPECT_EQ(cmp("b", "ab"), 1);  // not shortest-first like jsonb
}

TEST(CompareKeys, EmptyKeySortsFirst) {
  EXPECT_EQ(cmp("", "a"), -1);
  EXPECT_EQ(cmp("a", ""), 1);
  EXPECT_EQ(cmp("", ""), 0);
  EXPECT_EQ(sign(compare_keys({nullptr, 0}, sl("a"))), -1);
  EXPECT_EQ(sign(compare_keys({nullptr, 0}, {nullptr, 0})), 0);
}

TEST(CompareKeys, EqualKeys) {
  EXPECT_EQ(cmp("a", "a"), 0);
  EXPECT_EQ(cmp(kEmoji, kEmoji), 0);
}

TEST(CompareKeys, CodePointOrderNotUtf16Order) {
  EXPECT_EQ(cmp(kFffd, kEmoji), -1);  // UTF-16 would put the surrogate pair first
  EXPECT_EQ(cmp(kEmoji, kFffd), 1);
  EXPECT_EQ(cmp("\xEE\x80\x80", "\xEF\xBF\xAE"), -1);      // U+E000 < U+FFEE
  EXPECT_EQ(cmp("\xEF\xBF\xAE", "\xF0\x90\x80\x80"), -1);  // U+FFEE < U+10000
}

TEST(CompareKeys, CaseAndNonAscii) {
  EXPECT_EQ(cmp("Z", "z"), -1);
  EXPECT_EQ(cmp("z", "\xC3\xA9"), -1);     // z < é: bytes compare unsigned
  EXPECT_EQ(cmp("\x7F", "\xC2\x80"), -1);  // U+007F < U+0080
  EXPECT_EQ(cmp("1", "B"), -1);
  EXPECT_EQ(cmp("B", "_"), -1);
  EXPECT_EQ(cmp("_", "a"), -1);
}

TEST(CompareKeys, EmbeddedNulIsAnOrdinaryByte) {
  EXPECT_EQ(cmp("a", std::string("a\0", 2)), -1);
  EXPECT_EQ(cmp(std::string("a\0", 2), "a\x01"), -1);
}

TEST(CompareKeys, SortsLikeTheKatVector) {
  std::vector<std::string> keys = {"b", "ab", "a", "aa", "", kEmoji, kFffd, "\xC3\xA9", "z", "Z"};
  std::sort(keys.begin(), keys.end(),
            [](const std::string& x, const std::string& y) { return cmp(x, y) < 0; });
  const std::vector<std::string> want = {"", "Z", "a", "aa", "ab", "b", "z", "\xC3\xA9", kFffd,
                                         kEmoji};
  EXPECT_EQ(keys, want);
}

// ---- JsonWriter::string escaping ---------------------------------------------------------
TEST(JsonString, PlainTextIsQuoted) {
  EXPECT_EQ(escaped(""), "\"\"");
  EXPECT_EQ(escaped("abc"), "\"abc\"");
}

TEST(JsonString, TwoCharacterEscapes) {
  EXPECT_EQ(escaped("\""), R"("\"")");
  EXPECT_EQ(escaped("\\"), R"("\\")");
  EXPECT_EQ(escaped("\b"), R"("\b")");
  EXPECT_EQ(escaped("\f"), R"("\f")");
  EXPECT_EQ(escaped("\n"), R"("\n")");
  EXPECT_EQ(escaped("\r"), R"("\r")");
  EXPECT_EQ(escaped("\t"), R"("\t")");
  EXPECT_EQ(escaped("quote\" backslash\\ b\b f\f n\n r\r t\t"),
            R"("quote\" backslash\\ b\b f\f n\n r\r t\t")");
}

TEST(JsonString, OtherControlsAsLowerCaseUnicodeEscapes) {
  EXPECT_EQ(escaped("\x01"), R"("\u0001")");
  EXPECT_EQ(escaped("\x1F"), R"("\u001f")");
  EXPECT_EQ(escaped("\x0B"), R"("\u000b")");
  EXPECT_EQ(escaped("\x1A"), R"("\u001a")");
  EXPECT_EQ(escaped("\x1B"), R"("\u001b")");
  EXPECT_EQ(escaped(std::string("\0", 1)), R"("\u0000")");
  EXPECT_EQ(escaped("x\x01y\x1Fz"), R"("x\u0001y\u001fz")");
}

TEST(JsonString, EveryByteBelow0x20) {
  for (int c = 0; c < 0x20; ++c) {
    std::string want;
    switch (c) {
      case '\b': want = "\\b"; break;
      case '\f': want = "\\f"; break;
      case '\n': want = "\\n"; break;
      case '\r': want = "\\r"; break;
      case '\t': want = "\\t"; break;
      default: {
        const char* hex = "0123456789abcdef";
        want = std::string("\\u00") + hex[c >> 4] + hex[c & 0xF];
      }
    }
    EXPECT_EQ(escaped(std::string(1, static_cast<char>(c))), "\"" + want + "\"") << "byte " << c;
  }
}

TEST(JsonString, VerbatimCharacters) {
  EXPECT_EQ(escaped("\x7F"), "\"\x7F\"");  // DEL is not escaped
  EXPECT_EQ(escaped("a/b"), "\"a/b\"");    // nor is the solidus
  EXPECT_EQ(escaped("'"), "\"'\"");
  const std::string non_ascii = "caf\xC3\xA9 \xE6\x97\xA5" + kEmoji + "\xE2\x80\xA8" + "\xC2\x85";
  EXPECT_EQ(escaped(non_ascii), "\"" + non_ascii + "\"");
  for (int c = 0x20; c < 0x100; ++c) {
    if (c == '"' || c == '\\') continue;
    const std::string s(1, static_cast<char>(c));
    EXPECT_EQ(escaped(s), "\"" + s + "\"") << "byte " << c;
  }
}

TEST(JsonString, EscapesBetweenVerbatimRuns) {
  EXPECT_EQ(escaped("a\"b\\c\nd\x01" "e"), R"("a\"b\\c\nd\u0001e")");
  EXPECT_EQ(escaped("\"\""), R"("\"\"")");
}

// ---- JsonWriter buffering ------------------------------------------------------------------
TEST(JsonWriter, FlushOnEmptyWriterCallsNoSink) {
  Capture cap;
  JsonWriter w(&Capture::sink, &cap);
  w.flush();
  w.flush();
  EXPECT_TRUE(cap.blocks.empty());
}

TEST(JsonWriter, SmallOutputWaitsForFlush) {
  Capture cap;
  JsonWriter w(&Capture::sink, &cap);
  w.put('{');
  w.string(sl("k"));
  w.put(':');
  w.put("true", 4);
  w.put('}');
  EXPECT_TRUE(cap.blocks.empty()) << "nothing reaches the sink before the buffer fills";
  w.flush();
  ASSERT_EQ(cap.blocks.size(), 1u);
  EXPECT_EQ(cap.blocks[0], R"({"k":true})");
  w.flush();
  EXPECT_EQ(cap.blocks.size(), 1u) << "a second flush has nothing to hand over";
}

TEST(JsonWriter, WriterIsReusableAfterFlush) {
  Capture cap;
  JsonWriter w(&Capture::sink, &cap);
  w.put("one", 3);
  w.flush();
  w.put("two", 3);
  w.flush();
  EXPECT_EQ(cap.blocks, (std::vector<std::string>{"one", "two"}));
}

TEST(JsonWriter, ExactlyOneBufferFull) {
  Capture cap;
  JsonWriter w(&Capture::sink, &cap);
  const std::string text(8192, 'q');
  w.put(text.data(), text.size());
  w.flush();
  ASSERT_EQ(cap.blocks.size(), 1u);
  EXPECT_EQ(cap.blocks[0], text);
}

TEST(JsonWriter, OneByteOverABufferFull) {
  Capture cap;
  JsonWriter w(&Capture::sink, &cap);
  const std::string text = std::string(8192, 'q') + "r";
  w.put(text.data(), text.size());
  EXPECT_EQ(cap.blocks.size(), 1u) << "the full buffer is handed over once more bytes arrive";
  w.flush();
  EXPECT_EQ(cap.blocks.size(), 2u);
  EXPECT_EQ(cap.text(), text);
  expect_blocks_within_buffer(cap);
}

TEST(JsonWriter, LargeStringReachesSinkInBlocks) {
  std::string s;
  for (int i = 0; i < 100000; ++i) s += static_cast<char>('a' + i % 26);
  Capture cap;
  JsonWriter w(&Capture::sink, &cap);
  w.string(sl(s));
  w.flush();
  EXPECT_GE(cap.blocks.size(), 13u);  // 100002 bytes / 8192
  expect_blocks_within_buffer(cap);
  EXPECT_EQ(cap.text(), "\"" + s + "\"");
}

TEST(JsonWriter, EscapesSplitAcrossBlocks) {
  // '"' and 5000 "\n" escapes are 10001 bytes, so the escape at bytes 8191-8192
  // straddles the first block boundary; then k verbatim bytes put a \u0001
  // escape at bytes 16380-16385, across the second.
  const std::size_t k = 16384 - 10001 - 4;
  const std::string s = std::string(5000, '\n') + std::string(k, 'x') + "\x01" + std::string(100, 'y');
  std::string want = "\"";
  for (int i = 0; i < 5000; ++i) want += "\\n";
  want += std::string(k, 'x') + "\\u0001" + std::string(100, 'y') + "\"";
  Capture cap;
  JsonWriter w(&Capture::sink, &cap);
  w.string(sl(s));
  w.flush();
  EXPECT_GE(cap.blocks.size(), 3u);
  expect_blocks_within_buffer(cap);
  EXPECT_EQ(cap.text(), want);
}

TEST(JsonWriter, ManySinglePutCalls) {
  std::string want;
  Capture cap;
  JsonWriter w(&Capture::sink, &cap);
  for (int i = 0; i < 20000; ++i) {
    const char c = static_cast<char>('0' + i % 10);
    w.put(c);
    want += c;
  }
  w.flush();
  EXPECT_GE(cap.blocks.size(), 3u);  // 20000 bytes / 8192
  expect_blocks_within_buffer(cap);
  EXPECT_EQ(cap.text(), want);
}

TEST(JsonWriter, ManyStringsOfAllSizes) {
  std::string want;
  Capture cap;
  JsonWriter w(&Capture::sink, &cap);
  w.put('[');
  want += '[';
  for (int n = 0; n < 400; ++n) {
    if (n != 0) {
      w.put(',');
      want += ',';
    }
    const std::string s(n, static_cast<char>(n % 2 ? 't' : '\t'));
    w.string(sl(s));
    want += '"';
    for (char c : s) want += c == '\t' ? std::string("\\t") : std::string(1, c);
    want += '"';
  }
  w.put(']');
  want += ']';
  w.flush();
  EXPECT_GT(cap.blocks.size(), 1u);
  expect_blocks_within_buffer(cap);
  EXPECT_EQ(cap.text(), want);
}

TEST(JsonWriter, HashingThroughTheSink) {
  // The glue's use: the sink feeds a Sha256. SHA-256("{}") is in vectors.py's self-check.
  idem::core::Sha256 h;
  JsonWriter w(
      [](void* context, const char* data, std::size_t size) {
        static_cast<idem::core::Sha256*>(context)->update(data, size);
      },
      &h);
  w.put('{');
  w.put('}');
  w.flush();
  const auto d = h.finish();
  char out[65];
  idem::core::to_hex(d.data(), d.size(), out);
  EXPECT_STREQ(out, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
}
