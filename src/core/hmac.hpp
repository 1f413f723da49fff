// hmac.hpp: HMAC-SHA256 through OpenSSL: a digest nobody without the key can
// predict or steer, for the store's lock tags.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sha256.hpp"

namespace idem::core {

// A keyed SHA-256 (RFC 2104) whose key is set once: the padded key is
// hashed at construction, and reset() starts a new message from that state
// without hashing the key again.
class HmacSha256 {
 public:
  HmacSha256(const std::uint8_t* key, std::size_t size);
  ~HmacSha256();
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;

  void reset();
  void update(const void* data, std::size_t size);
  Digest finish();

  // One-shot convenience for tests.
  static Digest of(const std::uint8_t* key, std::size_t key_size, const void* data, std::size_t size);

 private:
  void* ctx_;  // EVP_MAC_CTX (OpenSSL 3) or HMAC_CTX (1.1)
};

}  // namespace idem::core
