// hmac_test.cpp: HmacSha256 against RFC 4231's test cases, streaming, reset
// and key separation. (The vectors were also checked with Python's hmac.)
#include <gtest/gtest.h>

#include <string>

#include "core/hex.hpp"
#include "core/hmac.hpp"

using idem::core::Digest;
using idem::core::HmacSha256;

namespace {

std::string hex(const Digest& d) {
  char out[65];
  idem::core::to_hex(d.data(), d.size(), out);
  return out;
}

std::string hmac_hex(const std::string& key, const std::string& data) {
  return hex(HmacSha256::of(reinterpret_cast<const std::uint8_t*>(key.data()), key.size(), data.data(), data.size()));
}

}  // namespace

// RFC 4231, test cases 1, 2 and 6 (HMAC-SHA-256).
TEST(HmacSha256, Rfc4231Case1) {
  EXPECT_EQ(hmac_hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(HmacSha256, Rfc4231Case2KeyShorterThanOutput) {
  EXPECT_EQ(hmac_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(HmacSha256, Rfc4231Case6KeyLongerThanBlock) {
  EXPECT_EQ(hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, StreamingAndResetGiveTheOneShotDigest) {
  const std::string key(32, '\x5c');
  const std::string data = "namespace\0key-1";
  HmacSha256 h(reinterpret_cast<const std::uint8_t*>(key.data()), key.size());
  for (char c : data) h.update(&c, 1);
  const std::string streamed = hex(h.finish());
  EXPECT_EQ(streamed, hmac_hex(key, data));
  for (int i = 0; i < 3; ++i) {  // the keyed state survives any number of messages
    h.reset();
    h.update(data.data(), data.size());
    EXPECT_EQ(hex(h.finish()), streamed);
  }
  h.reset();
  EXPECT_EQ(hex(h.finish()), hmac_hex(key, ""));
}

TEST(HmacSha256, AnotherKeyAnotherDigest) {
  EXPECT_NE(hmac_hex(std::string(32, 'a'), "payments\0k"), hmac_hex(std::string(32, 'b'), "payments\0k"));
}
