// sha256.hpp: streaming SHA-256 through OpenSSL's EVP interface.
//
// The one place the project touches a hash primitive; no hand-written crypto.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace idem::core {

using Digest = std::array<std::uint8_t, 32>;

// An EVP_MD_CTX owned for the object's lifetime and reusable: reset() starts a
// new digest, so a long-lived instance costs one allocation in total.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void reset();
  void update(const void* data, std::size_t size);
  Digest finish();

  // One-shot convenience for tests and small inputs.
  static Digest of(const void* data, std::size_t size);

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace idem::core
