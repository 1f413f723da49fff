// hex_test.cpp: lowercase hexadecimal encoding with its NUL terminator.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/hex.hpp"

using idem::core::to_hex;

TEST(Hex, KnownBytesAreLowerCase) {
  const std::uint8_t bytes[] = {0x00, 0x01, 0x0F, 0x10, 0x7F, 0x80, 0xAB, 0xCD, 0xEF, 0xFF};
  char out[2 * sizeof bytes + 2];
  std::memset(out, 'X', sizeof out);
  to_hex(bytes, sizeof bytes, out);
  EXPECT_EQ(std::string(out), "00010f107f80abcdefff");
  EXPECT_EQ(out[2 * sizeof bytes], '\0');
  EXPECT_EQ(out[2 * sizeof bytes + 1], 'X') << "to_hex wrote past its NUL";
}

TEST(Hex, EmptyInputWritesOnlyTheTerminator) {
  char out[2] = {'X', 'X'};
  to_hex(nullptr, 0, out);
  EXPECT_EQ(out[0], '\0');
  EXPECT_EQ(out[1], 'X');
}

TEST(Hex, EveryByteValue) {
  std::uint8_t bytes[256];
  for (int b = 0; b < 256; ++b) bytes[b] = static_cast<std::uint8_t>(b);
  char out[2 * 256 + 1];
  to_hex(bytes, sizeof bytes, out);
  ASSERT_EQ(std::strlen(out), 512u);
  for (int b = 0; b < 256; ++b) {
    char want[3];
    std::snprintf(want, sizeof want, "%02x", b);
    EXPECT_EQ(std::string(out + 2 * b, 2), want) << "byte " << b;
  }
}

TEST(Hex, DigestSizedInput) {
  std::uint8_t bytes[32];
  for (int b = 0; b < 32; ++b) bytes[b] = static_cast<std::uint8_t>(0xA0 + b);
  char out[65];
  to_hex(bytes, sizeof bytes, out);
  EXPECT_EQ(std::string(out),
            "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf");
}
