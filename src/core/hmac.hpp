// hmac.hpp: HMAC-SHA256 through OpenSSL's EVP interface: a digest nobody
// without the key can predict or steer, for the store's lock tags.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sha256.hpp"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace idem::core {

// A keyed SHA-256 (RFC 2104) whose key is set once: the padded key is
// hashed at construction, and reset() starts a new message from that state,
// so a long-lived instance costs two SHA-256 compressions per message less
// than a one-shot HMAC.
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
  EVP_MD_CTX* keyed_;  // initialised with the key, never updated: the state reset() copies
  EVP_MD_CTX* ctx_;    // the message in progress
};

}  // namespace idem::core
