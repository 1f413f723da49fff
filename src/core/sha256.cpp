// sha256.cpp: the EVP calls behind Sha256, with OpenSSL failures as exceptions.
#include "sha256.hpp"

#include <openssl/evp.h>

#include "error.hpp"

namespace idem::core {

namespace {

[[noreturn]] void openssl_failed(const char* what) {
  throw Error(sqlstate::internal_error, "OpenSSL SHA-256 failure", std::string(what) + " failed.");
}

// The SHA-256 implementation, fetched once per process: OpenSSL 3 otherwise
// repeats a provider lookup on every EVP_DigestInit_ex(EVP_sha256()).
const EVP_MD* sha256_md() {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
  static const EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
#else
  static const EVP_MD* md = EVP_sha256();
#endif
  if (md == nullptr) openssl_failed("EVP_MD_fetch(SHA256)");
  return md;
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) throw std::bad_alloc();
  try {
    reset();
  } catch (...) {
    EVP_MD_CTX_free(ctx_);  // no destructor runs for a half-built object
    throw;
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::reset() {
  if (EVP_DigestInit_ex(ctx_, sha256_md(), nullptr) != 1) openssl_failed("EVP_DigestInit_ex");
}

void Sha256::update(const void* data, std::size_t size) {
  if (size != 0 && EVP_DigestUpdate(ctx_, data, size) != 1) openssl_failed("EVP_DigestUpdate");
}

Digest Sha256::finish() {
  Digest out;
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_, out.data(), &len) != 1 || len != out.size())
    openssl_failed("EVP_DigestFinal_ex");
  return out;
}

Digest Sha256::of(const void* data, std::size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.finish();
}

}  // namespace idem::core
