// json_pointer_test.cpp: RFC 6901 pointer parsing (pointer_tokens) and the flat trie of
// PointerSet: limits, bound/build sizes, bytewise-deterministic blocks, and child/element lookups.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_pointer.hpp"
#include "support.hpp"

using idem::core::max_pointer_bytes;
using idem::core::max_pointers;
using idem::core::pointer_tokens;
using idem::core::PointerSet;
using idem::core::Slice;
using idem_test::sl;
using Node = PointerSet::Node;
using Tokens = std::vector<std::string>;

namespace {

// Slices over each string (the strings must outlive them).
std::vector<Slice> slices(const std::vector<std::string>& pointers) {
  std::vector<Slice> out;
  for (const auto& p : pointers) out.push_back(sl(p));
  return out;
}

// Expects pointer_tokens(pointer) to throw Error 22023.
void expect_bad_pointer(const std::string& pointer) {
  SCOPED_TRACE("pointer \"" + pointer.substr(0, 40) + "\" of " + std::to_string(pointer.size()) + " bytes");
  const auto e = EXPECT_CORE_ERROR(pointer_tokens(sl(pointer)));
  EXPECT_STREQ(e.sqlstate(), "22023");
  EXPECT_FALSE(e.message().empty());
}

// A block built from pointers into 8-byte aligned storage pre-filled with fill,
// with 64 canary bytes (also fill) after bound() bytes.
struct Built {
  std::size_t bound = 0;
  std::size_t used = 0;
  std::vector<std::uint64_t> storage;

  const unsigned char* bytes() const { return reinterpret_cast<const unsigned char*>(storage.data()); }
  std::string used_bytes() const { return std::string(reinterpret_cast<const char*>(bytes()), used); }
  PointerSet set() const { return PointerSet(storage.data()); }
};

constexpr std::size_t kCanary = 64;

Built build(const std::vector<std::string>& pointers, unsigned char fill = 0xA5) {
  const auto s = slices(pointers);
  Built b;
  b.bound = PointerSet::bound(s.data(), s.size());
  b.storage.resize((b.bound + kCanary + 7) / 8);
  std::memset(b.storage.data(), fill, b.storage.size() * 8);
  b.used = PointerSet::build(s.data(), s.size(), b.storage.data());
  EXPECT_LE(b.used, b.bound);
  // Nothing written past bound() bytes.
  for (std::size_t i = b.bound; i < b.storage.size() * 8; ++i) {
    EXPECT_EQ(b.bytes()[i], fill) << "byte " << i << " past bound " << b.bound;
    if (b.bytes()[i] != fill) break;
  }
  return b;
}

// The node reached from the root by tokens, or nullptr.
const Node* find(const PointerSet& set, const Tokens& tokens) {
  const Node* node = set.root();
  for (const auto& t : tokens) {
    node = set.child(node, sl(t));
    if (node == nullptr) return nullptr;
  }
  return node;
}

// True if the pointer given by tokens names a left-out value (some prefix ends).
bool left_out(const PointerSet& set, const Tokens& tokens) {
  const Node* node = set.root();
  if (node->ends) return true;
  for (const auto& t : tokens) {
    node = set.child(node, sl(t));
    if (node == nullptr) return false;
    if (node->ends) return true;
  }
  return false;
}

}  // namespace

// ---- pointer_tokens ------------------------------------------------------------------
TEST(PointerTokens, SplitsOnSlash) {
  EXPECT_EQ(pointer_tokens(sl("/a")), (Tokens{"a"}));
  EXPECT_EQ(pointer_tokens(sl("/a/b/c")), (Tokens{"a", "b", "c"}));
  EXPECT_EQ(pointer_tokens(sl("/items/0")), (Tokens{"items", "0"}));
  EXPECT_EQ(pointer_tokens(sl("/trace_id")), (Tokens{"trace_id"}));
}

TEST(PointerTokens, EmptyTokens) {
  EXPECT_EQ(pointer_tokens(sl("/")), (Tokens{""}));
  EXPECT_EQ(pointer_tokens(sl("//")), (Tokens{"", ""}));
  EXPECT_EQ(pointer_tokens(sl("/a/")), (Tokens{"a", ""}));
  EXPECT_EQ(pointer_tokens(sl("//a")), (Tokens{"", "a"}));
  EXPECT_EQ(pointer_tokens(sl("/a//b")), (Tokens{"a", "", "b"}));
}

TEST(PointerTokens, Escapes) {
  EXPECT_EQ(pointer_tokens(sl("/~0")), (Tokens{"~"}));
  EXPECT_EQ(pointer_tokens(sl("/~1")), (Tokens{"/"}));
  EXPECT_EQ(pointer_tokens(sl("/~01")), (Tokens{"~1"}));  // decoded once, not to "/"
  EXPECT_EQ(pointer_tokens(sl("/~10")), (Tokens{"/0"}));
  EXPECT_EQ(pointer_tokens(sl("/a~1b")), (Tokens{"a/b"}));
  EXPECT_EQ(pointer_tokens(sl("/m~0n")), (Tokens{"m~n"}));
  EXPECT_EQ(pointer_tokens(sl("/~0~1/~1~0")), (Tokens{"~/", "/~"}));
  EXPECT_EQ(pointer_tokens(sl("/~0/~1")), (Tokens{"~", "/"}));
}

TEST(PointerTokens, OtherBytesPassThrough) {
  EXPECT_EQ(pointer_tokens(sl("/\xC3\xA9")), (Tokens{"\xC3\xA9"}));  // "é"
  EXPECT_EQ(pointer_tokens(sl("/\xF0\x9F\x98\x80/x")), (Tokens{"\xF0\x9F\x98\x80", "x"}));
  EXPECT_EQ(pointer_tokens(sl("/ a b ")), (Tokens{" a b "}));
  EXPECT_EQ(pointer_tokens(sl("/a\\b")), (Tokens{"a\\b"}));
  EXPECT_EQ(pointer_tokens(sl("/-")), (Tokens{"-"}));
  EXPECT_EQ(pointer_tokens(sl(std::string("/a\0b", 4))), (Tokens{std::string("a\0b", 3)}));
}

TEST(PointerTokens, RejectsWholeDocument) { expect_bad_pointer(""); }

TEST(PointerTokens, RejectsMissingLeadingSlash) {
  expect_bad_pointer("a");
  expect_bad_pointer("a/b");
  expect_bad_pointer("~1");
  expect_bad_pointer(" /a");
  expect_bad_pointer("#/a");  // URI fragment form is not accepted
}

TEST(PointerTokens, RejectsBadEscapes) {
  expect_bad_pointer("/a~");
  expect_bad_pointer("/~");
  expect_bad_pointer("/a~2");
  expect_bad_pointer("/~a");
  expect_bad_pointer("/~/");
  expect_bad_pointer("/a/~~0");
  expect_bad_pointer("/ok/b~");
}

TEST(PointerTokens, Length) {
  const std::string exact = "/" + std::string(max_pointer_bytes - 1, 'x');
  ASSERT_EQ(exact.size(), max_pointer_bytes);
  EXPECT_EQ(pointer_tokens(sl(exact)), (Tokens{std::string(max_pointer_bytes - 1, 'x')}));

  expect_bad_pointer(exact + "x");
  expect_bad_pointer(exact + "/");
  expect_bad_pointer(std::string(max_pointer_bytes + 1, '/'));
  expect_bad_pointer(std::string(10 * max_pointer_bytes, 'a'));
}

// ---- PointerSet::bound / build -------------------------------------------------------
TEST(PointerSetBuild, EmptySet) {
  const Built b = build({});
  const PointerSet set = b.set();
  EXPECT_EQ(set.root()->ends, 0u);
  EXPECT_EQ(set.root()->child_count, 0u);
  EXPECT_EQ(set.child(set.root(), sl("a")), nullptr);
  EXPECT_EQ(set.child(set.root(), sl("")), nullptr);
  EXPECT_EQ(set.element(set.root(), 0), nullptr);
}

TEST(PointerSetBuild, AcceptsExactlyMaxPointers) {
  std::vector<std::string> pointers;
  for (std::size_t i = 0; i < max_pointers; ++i) pointers.push_back("/p" + std::to_string(i));
  const Built b = build(pointers);
  const PointerSet set = b.set();
  for (std::size_t i = 0; i < max_pointers; ++i) {
    const Node* n = set.child(set.root(), sl("p" + std::to_string(i)));
    ASSERT_NE(n, nullptr) << i;
    EXPECT_EQ(n->ends, 1u) << i;
  }
}

TEST(PointerSetBuild, AcceptsMaxPointersOfMaxBytes) {
  std::vector<std::string> pointers;
  for (std::size_t i = 0; i < max_pointers; ++i) {
    std::string p = "/" + std::to_string(i) + "/";
    p += std::string(max_pointer_bytes - p.size(), static_cast<char>('a' + i % 26));
    ASSERT_EQ(p.size(), max_pointer_bytes);
    pointers.push_back(p);
  }
  const Built b = build(pointers);
  const PointerSet set = b.set();
  for (const auto& p : pointers) {
    const Node* n = find(set, pointer_tokens(sl(p)));
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->ends, 1u);
  }
}

TEST(PointerSetBuild, RejectsMoreThanMaxPointers) {
  std::vector<std::string> pointers;
  for (std::size_t i = 0; i <= max_pointers; ++i) pointers.push_back("/p" + std::to_string(i));
  const auto s = slices(pointers);
  const auto e1 = EXPECT_CORE_ERROR(PointerSet::bound(s.data(), s.size()));
  EXPECT_STREQ(e1.sqlstate(), "22023");

  // build checks too, and writes nothing before it throws.
  std::vector<std::uint64_t> block(4096, 0x5A5A5A5A5A5A5A5Aull);
  const auto e2 = EXPECT_CORE_ERROR(PointerSet::build(s.data(), s.size(), block.data()));
  EXPECT_STREQ(e2.sqlstate(), "22023");
  EXPECT_TRUE(std::all_of(block.begin(), block.end(), [](std::uint64_t w) { return w == 0x5A5A5A5A5A5A5A5Aull; }));

  // The limit is on different pointers: max_pointers + 1 copies of one are
  // one pointer, and max_pointers different ones plus a repeat are taken.
  const std::vector<std::string> same(max_pointers + 1, "/a");
  const auto s2 = slices(same);
  EXPECT_GT(PointerSet::bound(s2.data(), s2.size()), 0u);
  pointers.back() = pointers.front();
  const auto s3 = slices(pointers);
  EXPECT_GT(PointerSet::bound(s3.data(), s3.size()), 0u);
}

TEST(PointerSetBuild, RepeatsCostNothing) {
  // A pointer given 10,000 times: bound() and the block are those of the
  // pointer given once (bound() counted every copy once, asking for memory
  // in proportion to the array).
  const std::vector<std::string> once{"/a/b", "/c"};
  std::vector<std::string> repeated;
  for (int i = 0; i < 10000; ++i) repeated.push_back(once[i % 2]);
  const auto s1 = slices(once);
  const auto s2 = slices(repeated);
  const std::size_t b1 = PointerSet::bound(s1.data(), s1.size());
  EXPECT_EQ(PointerSet::bound(s2.data(), s2.size()), b1);
  std::vector<std::uint64_t> k1(b1 / 8 + 1, 0x1111111111111111ull), k2(b1 / 8 + 1, 0x2222222222222222ull);
  const std::size_t u1 = PointerSet::build(s1.data(), s1.size(), k1.data());
  const std::size_t u2 = PointerSet::build(s2.data(), s2.size(), k2.data());
  ASSERT_EQ(u1, u2);
  EXPECT_EQ(std::memcmp(k1.data(), k2.data(), u1), 0);
}

TEST(PointerSetBuild, RejectsABadPointerAmongGoodOnes) {
  const std::string too_long = "/" + std::string(max_pointer_bytes, 'x');
  for (const std::string& bad : std::vector<std::string>{"", "a", "/a~", "/a~2", too_long}) {
    SCOPED_TRACE("bad pointer of " + std::to_string(bad.size()) + " bytes");
    const std::vector<std::string> pointers{"/ok", bad, "/also/ok"};
    const auto s = slices(pointers);
    EXPECT_STREQ(EXPECT_CORE_ERROR(PointerSet::bound(s.data(), s.size())).sqlstate(), "22023");
    std::vector<std::uint64_t> block(1024, 0);
    EXPECT_STREQ(EXPECT_CORE_ERROR(PointerSet::build(s.data(), s.size(), block.data())).sqlstate(), "22023");
    EXPECT_TRUE(std::all_of(block.begin(), block.end(), [](std::uint64_t w) { return w == 0; }));
  }
}

TEST(PointerSetBuild, UsesAtMostBound) {
  const std::vector<std::vector<std::string>> sets{
      {},
      {"/a"},
      {"/"},
      {"//"},
      {"/a", "/a"},
      {"/a/b", "/a/b", "/a/b"},
      {"/a", "/a/b", "/a/b/c"},
      {"/a/b/c", "/a/b", "/a"},
      {"/x/y", "/x/z", "/x/y/w", "/q"},
      {"/items/0", "/items/12", "/items/01", "/items/-"},
      {"/\xC3\xA9", "/z", "/~0~1", "/a~1b/c"},
      {"/" + std::string(max_pointer_bytes - 1, 'L'), "/" + std::string(max_pointer_bytes - 1, 'L')},
  };
  for (const auto& pointers : sets) {
    const Built b = build(pointers);
    EXPECT_GT(b.used, 0u);
    EXPECT_LE(b.used, b.bound) << pointers.size() << " pointers";
  }
}

TEST(PointerSetBuild, BoundGrowsWithTokens) {
  const std::vector<std::string> one{"/a"}, two{"/a/b"}, longer{"/abcdef"};
  const auto s1 = slices(one), s2 = slices(two), s3 = slices(longer);
  const std::size_t b0 = PointerSet::bound(nullptr, 0);
  const std::size_t b1 = PointerSet::bound(s1.data(), 1);
  const std::size_t b2 = PointerSet::bound(s2.data(), 1);
  const std::size_t b3 = PointerSet::bound(s3.data(), 1);
  EXPECT_EQ(b1 - b0, sizeof(Node) + 1);  // one node, one token byte
  EXPECT_EQ(b2 - b1, sizeof(Node) + 1);
  EXPECT_EQ(b3 - b1, 5u);
}

TEST(PointerSetBuild, NoUninitialisedBytesInUsedSize) {
  const std::vector<std::vector<std::string>> sets{
      {},
      {"/a"},
      {"/a/b", "/a", "/c/d/e", "/c/d/f", "/c/x"},
      {"/", "//", "/\xC3\xA9", "/z", std::string("/n\0l", 4)},
      {"/items/0", "/items/12", "/items/01", "/items/-", "/items/12"},
  };
  for (const auto& pointers : sets) {
    const Built zeros = build(pointers, 0x00);
    const Built ones = build(pointers, 0xFF);
    const Built mixed = build(pointers, 0x5C);
    ASSERT_EQ(zeros.used, ones.used);
    ASSERT_EQ(zeros.used, mixed.used);
    EXPECT_EQ(zeros.used_bytes(), ones.used_bytes()) << pointers.size() << " pointers";
    EXPECT_EQ(zeros.used_bytes(), mixed.used_bytes()) << pointers.size() << " pointers";
  }
}

TEST(PointerSetBuild, DeterministicWhateverTheOrder) {
  const std::vector<std::string> pointers{
      "/a/b", "/a", "/c/d/e", "/c/d/f", "/c/x", "/\xC3\xA9", "/z", "/", "//",
      "/a/b", "/items/0", "/items/12", "/items/2", "/m~0n", "/a~1b", "/c/d/e",
  };
  const Built reference = build(pointers, 0x00);
  std::mt19937 rng(20240601);
  for (int round = 0; round < 25; ++round) {
    std::vector<std::string> shuffled = pointers;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const Built b = build(shuffled, static_cast<unsigned char>(0x11 * (round % 16)));
    ASSERT_EQ(b.used, reference.used) << "round " << round;
    EXPECT_EQ(b.used_bytes(), reference.used_bytes()) << "round " << round;
  }
  std::vector<std::string> reversed(pointers.rbegin(), pointers.rend());
  const Built r = build(reversed, 0xEE);
  ASSERT_EQ(r.used, reference.used);
  EXPECT_EQ(r.used_bytes(), reference.used_bytes());
}

TEST(PointerSetBuild, DifferentSetsGiveDifferentBlocks) {
  // The glue compares blocks to see whether a namespace's pointers changed.
  const Built a = build({"/a", "/b"});
  const Built b = build({"/a", "/c"});
  const Built c = build({"/a"});
  const Built d = build({"/a/b"});
  EXPECT_NE(a.used_bytes(), b.used_bytes());
  EXPECT_NE(a.used_bytes(), c.used_bytes());
  EXPECT_NE(c.used_bytes(), d.used_bytes());
}

TEST(PointerSetBuild, SubsumedPointersLeaveNoTrace) {
  // "/a" leaves out all below it, so adding "/a/b" names the same set.
  const Built a = build({"/a"}, 0x00);
  const Built ab = build({"/a", "/a/b"}, 0xFF);
  const Built ba = build({"/a/b/c", "/a/b", "/a"}, 0x77);
  EXPECT_EQ(a.used_bytes(), ab.used_bytes());
  EXPECT_EQ(a.used_bytes(), ba.used_bytes());
  EXPECT_EQ(build({"/a", "/a"}).used_bytes(), a.used_bytes());
}

// ---- lookups -------------------------------------------------------------------------
TEST(PointerSetLookup, RootNeverEnds) {
  for (const std::vector<std::string>& pointers :
       {std::vector<std::string>{}, {"/a"}, {"/"}, {"//"}, {"/a", "/b/c"}}) {
    const Built b = build(pointers);
    EXPECT_EQ(b.set().root()->ends, 0u) << pointers.size() << " pointers";
  }
}

TEST(PointerSetLookup, SingleToken) {
  const Built b = build({"/a"});
  const PointerSet set = b.set();
  const Node* a = set.child(set.root(), sl("a"));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ends, 1u);
  EXPECT_EQ(a->child_count, 0u);
  EXPECT_EQ(set.child(a, sl("b")), nullptr);
  EXPECT_EQ(set.child(set.root(), sl("b")), nullptr);
  EXPECT_EQ(set.child(set.root(), sl("")), nullptr);
  EXPECT_EQ(set.child(set.root(), sl("A")), nullptr);
}

TEST(PointerSetLookup, NestedPath) {
  const Built b = build({"/a/b"});
  const PointerSet set = b.set();
  const Node* a = set.child(set.root(), sl("a"));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ends, 0u);
  EXPECT_EQ(a->child_count, 1u);
  const Node* ab = set.child(a, sl("b"));
  ASSERT_NE(ab, nullptr);
  EXPECT_EQ(ab->ends, 1u);
  EXPECT_EQ(ab->child_count, 0u);
  EXPECT_EQ(set.child(a, sl("c")), nullptr);
  EXPECT_EQ(set.child(set.root(), sl("b")), nullptr);  // "b" only under "a"
  EXPECT_EQ(set.child(ab, sl("b")), nullptr);
}

TEST(PointerSetLookup, EmptyTokens) {
  const Built b = build({"/", "/x//y"});
  const PointerSet set = b.set();
  const Node* empty = set.child(set.root(), sl(""));
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->ends, 1u);
  const Node* x = set.child(set.root(), sl("x"));
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->ends, 0u);
  const Node* xe = set.child(x, sl(""));
  ASSERT_NE(xe, nullptr);
  EXPECT_EQ(xe->ends, 0u);
  const Node* xey = set.child(xe, sl("y"));
  ASSERT_NE(xey, nullptr);
  EXPECT_EQ(xey->ends, 1u);
  EXPECT_EQ(set.child(x, sl("y")), nullptr);
}

TEST(PointerSetLookup, EscapedTokensAreDecoded) {
  const Built b = build({"/a~1b", "/m~0n", "/~01"});
  const PointerSet set = b.set();
  EXPECT_NE(set.child(set.root(), sl("a/b")), nullptr);
  EXPECT_NE(set.child(set.root(), sl("m~n")), nullptr);
  EXPECT_NE(set.child(set.root(), sl("~1")), nullptr);
  EXPECT_EQ(set.child(set.root(), sl("a~1b")), nullptr);
  EXPECT_EQ(set.child(set.root(), sl("a")), nullptr);
  EXPECT_EQ(set.child(set.root(), sl("/")), nullptr);
}

TEST(PointerSetLookup, PrefixSubsumes) {
  for (const std::vector<std::string>& pointers :
       {std::vector<std::string>{"/a", "/a/b"}, {"/a/b", "/a"}, {"/a/b/c", "/a", "/a/b"}}) {
    const Built b = build(pointers);
    const PointerSet set = b.set();
    const Node* a = set.child(set.root(), sl("a"));
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->ends, 1u);
    EXPECT_EQ(a->child_count, 0u);
    EXPECT_EQ(set.child(a, sl("b")), nullptr);
    EXPECT_EQ(set.element(a, 0), nullptr);
    EXPECT_TRUE(left_out(set, {"a", "b", "c"}));
  }
}

TEST(PointerSetLookup, SiblingsBelowADeeperPointer) {
  const Built b = build({"/c/d/e", "/c/d/f", "/c/x", "/c/d/e/g"});
  const PointerSet set = b.set();
  const Node* c = find(set, {"c"});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ends, 0u);
  EXPECT_EQ(c->child_count, 2u);
  const Node* d = find(set, {"c", "d"});
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->ends, 0u);
  EXPECT_EQ(d->child_count, 2u);
  ASSERT_NE(find(set, {"c", "d", "e"}), nullptr);
  EXPECT_EQ(find(set, {"c", "d", "e"})->ends, 1u);
  EXPECT_EQ(find(set, {"c", "d", "e"})->child_count, 0u);  // "/c/d/e/g" subsumed
  ASSERT_NE(find(set, {"c", "d", "f"}), nullptr);
  EXPECT_EQ(find(set, {"c", "d", "f"})->ends, 1u);
  ASSERT_NE(find(set, {"c", "x"}), nullptr);
  EXPECT_EQ(find(set, {"c", "x"})->ends, 1u);
  EXPECT_EQ(find(set, {"c", "d", "g"}), nullptr);
  EXPECT_EQ(find(set, {"c", "e"}), nullptr);
  EXPECT_EQ(find(set, {"d"}), nullptr);
  EXPECT_FALSE(left_out(set, {"c"}));
  EXPECT_FALSE(left_out(set, {"c", "d", "h"}));
  EXPECT_TRUE(left_out(set, {"c", "d", "e", "anything"}));
}

TEST(PointerSetLookup, TokensCompareBytewise) {
  const std::string nul_a("a\0", 2), nul_b("a\0b", 3);
  const Built b = build({"/b", "/aa", "/a", "/z", "/\xC3\xA9", "/" + nul_b, "/A", "/a~0"});
  const PointerSet set = b.set();
  for (const std::string& t : {std::string("a"), std::string("aa"), std::string("b"), std::string("z"),
                               std::string("\xC3\xA9"), nul_b, std::string("A"), std::string("a~")}) {
    const Node* n = set.child(set.root(), sl(t));
    ASSERT_NE(n, nullptr) << "token of " << t.size() << " bytes";
    EXPECT_EQ(n->ends, 1u);
  }
  // Distinct nodes for each.
  EXPECT_NE(set.child(set.root(), sl("a")), set.child(set.root(), sl("aa")));
  EXPECT_NE(set.child(set.root(), sl("a")), set.child(set.root(), sl(nul_b)));
  // Near misses.
  for (const std::string& t : {std::string("ab"), std::string("aaa"), std::string(""), std::string("c"),
                               std::string("\xC3"), std::string("\xC3\xA9\xC3\xA9"), std::string("e"), nul_a,
                               std::string("a\0c", 3), std::string("a~0"), std::string("bb"), std::string("Z")}) {
    EXPECT_EQ(set.child(set.root(), sl(t)), nullptr) << "token of " << t.size() << " bytes";
  }
}

TEST(PointerSetLookup, Elements) {
  const Built b = build({"/items/0", "/items/12", "/items/01", "/items/-", "/items/7/name"});
  const PointerSet set = b.set();
  const Node* items = set.child(set.root(), sl("items"));
  ASSERT_NE(items, nullptr);
  EXPECT_EQ(items->ends, 0u);

  const Node* e0 = set.element(items, 0);
  ASSERT_NE(e0, nullptr);
  EXPECT_EQ(e0->ends, 1u);
  EXPECT_EQ(e0, set.child(items, sl("0")));
  const Node* e12 = set.element(items, 12);
  ASSERT_NE(e12, nullptr);
  EXPECT_EQ(e12->ends, 1u);
  EXPECT_EQ(e12, set.child(items, sl("12")));
  EXPECT_NE(e0, e12);

  EXPECT_EQ(set.element(items, 1), nullptr);  // "/items/01" is no index
  EXPECT_EQ(set.element(items, 2), nullptr);
  EXPECT_EQ(set.element(items, 10), nullptr);
  EXPECT_EQ(set.element(items, 120), nullptr);
  EXPECT_EQ(set.element(items, 21), nullptr);

  const Node* e7 = set.element(items, 7);
  ASSERT_NE(e7, nullptr);
  EXPECT_EQ(e7->ends, 0u);
  ASSERT_NE(set.child(e7, sl("name")), nullptr);
  EXPECT_EQ(set.child(e7, sl("name"))->ends, 1u);

  // "-" (past the end) is a child, but matches no index.
  const Node* dash = set.child(items, sl("-"));
  ASSERT_NE(dash, nullptr);
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{12}, std::size_t{13},
                        std::size_t{100}, static_cast<std::size_t>(-1)})
    EXPECT_NE(set.element(items, i), dash) << i;
}

TEST(PointerSetLookup, ElementOnLeafOrChildlessNode) {
  const Built b = build({"/items", "/other/x"});
  const PointerSet set = b.set();
  const Node* items = set.child(set.root(), sl("items"));
  ASSERT_NE(items, nullptr);
  EXPECT_EQ(items->child_count, 0u);
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{9}, static_cast<std::size_t>(-1)})
    EXPECT_EQ(set.element(items, i), nullptr) << i;
  const Node* other = set.child(set.root(), sl("other"));
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(set.element(other, 0), nullptr);  // children, but none numeric
  EXPECT_EQ(set.element(set.root(), 0), nullptr);
}

TEST(PointerSetLookup, ElementsOnRoot) {
  // A top-level array's elements: "/0", "/3".
  const Built b = build({"/0", "/3"});
  const PointerSet set = b.set();
  ASSERT_NE(set.element(set.root(), 0), nullptr);
  ASSERT_NE(set.element(set.root(), 3), nullptr);
  EXPECT_EQ(set.element(set.root(), 1), nullptr);
  EXPECT_EQ(set.element(set.root(), 30), nullptr);
}

TEST(PointerSetLookup, LargeIndexes) {
  const std::size_t max = static_cast<std::size_t>(-1);
  ASSERT_EQ(std::to_string(max), "18446744073709551615");
  const std::vector<std::string> pointers{"/v/" + std::to_string(max), "/v/" + std::to_string(max - 1),
                                          "/v/1000000000000", "/v/9", "/v/10"};
  const Built b = build(pointers);
  const PointerSet set = b.set();
  const Node* v = set.child(set.root(), sl("v"));
  ASSERT_NE(v, nullptr);
  for (std::size_t i : {max, max - 1, std::size_t{1000000000000ull}, std::size_t{9}, std::size_t{10}}) {
    const Node* n = set.element(v, i);
    ASSERT_NE(n, nullptr) << i;
    EXPECT_EQ(n, set.child(v, sl(std::to_string(i)))) << i;
    EXPECT_EQ(n->ends, 1u) << i;
  }
  for (std::size_t i : {max - 2, max / 10, std::size_t{100000000000ull}, std::size_t{1}, std::size_t{0},
                        std::size_t{8}, std::size_t{11}, std::size_t{100}})
    EXPECT_EQ(set.element(v, i), nullptr) << i;
}

TEST(PointerSetLookup, ManySiblings) {
  std::vector<std::string> pointers;
  for (std::size_t i = 0; i < max_pointers; ++i) pointers.push_back("/k" + std::to_string(i));
  std::mt19937 rng(7);
  std::shuffle(pointers.begin(), pointers.end(), rng);
  const Built b = build(pointers);
  const PointerSet set = b.set();
  EXPECT_EQ(set.root()->child_count, max_pointers);
  for (std::size_t i = 0; i < max_pointers; ++i) {
    const std::string name = "k" + std::to_string(i);
    const Node* n = set.child(set.root(), sl(name));
    ASSERT_NE(n, nullptr) << name;
    EXPECT_EQ(n->ends, 1u) << name;
    EXPECT_EQ(n->child_count, 0u) << name;
  }
  for (const char* name : {"k64", "k65", "k100", "k", "", "k00", "k01", "k6 ", "k-1", "j0", "l0", "K0",
                                   "k630", "\xFF", "a", "z"}) {
    EXPECT_EQ(set.child(set.root(), sl(name)), nullptr) << name;
  }
}

TEST(PointerSetLookup, ManyNumericSiblings) {
  // Bytewise order ("10" < "2") must agree with how element() searches.
  std::vector<std::string> pointers;
  for (std::size_t i = 0; i < max_pointers; ++i) pointers.push_back("/list/" + std::to_string(i * 3));
  const Built b = build(pointers);
  const PointerSet set = b.set();
  const Node* list = set.child(set.root(), sl("list"));
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(list->child_count, max_pointers);
  for (std::size_t i = 0; i < max_pointers * 3 + 5; ++i) {
    const Node* n = set.element(list, i);
    if (i % 3 == 0 && i < max_pointers * 3) {
      ASSERT_NE(n, nullptr) << i;
      EXPECT_EQ(n->ends, 1u) << i;
    } else {
      EXPECT_EQ(n, nullptr) << i;
    }
  }
}

TEST(PointerSetLookup, BlockIsRelocatable) {
  // The glue copies blocks into PostgreSQL memory: a copy must work the same.
  const Built b = build({"/a/b", "/c", "/items/4"});
  std::vector<std::uint64_t> copy((b.used + 7) / 8, 0);
  std::memcpy(copy.data(), b.storage.data(), b.used);
  const PointerSet set(copy.data());
  EXPECT_EQ(find(set, {"a", "b"})->ends, 1u);
  EXPECT_EQ(find(set, {"c"})->ends, 1u);
  const Node* items = find(set, {"items"});
  ASSERT_NE(items, nullptr);
  ASSERT_NE(set.element(items, 4), nullptr);
  EXPECT_EQ(set.element(items, 4)->ends, 1u);
  EXPECT_EQ(find(set, {"a", "c"}), nullptr);
}
