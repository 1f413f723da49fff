// hmac.cpp: the EVP calls behind HmacSha256 (an HMAC key with
// EVP_DigestSign, available in OpenSSL 1.1 and 3), with OpenSSL failures as
// exceptions.
#include "hmac.hpp"

#include <openssl/evp.h>

#include <new>

#include "error.hpp"

namespace idem::core {

namespace {

[[noreturn]] void openssl_failed(const char* what) {
  throw Error(sqlstate::internal_error, "OpenSSL HMAC-SHA256 failure", std::string(what) + " failed.");
}

}  // namespace

HmacSha256::HmacSha256(const std::uint8_t* key, std::size_t size) : keyed_(EVP_MD_CTX_new()), ctx_(EVP_MD_CTX_new()) {
  EVP_PKEY* pkey = nullptr;
  try {
    if (keyed_ == nullptr || ctx_ == nullptr) throw std::bad_alloc();
    pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_HMAC, nullptr, key, size);
    if (pkey == nullptr) openssl_failed("EVP_PKEY_new_raw_private_key");
    // The context keeps its own reference to the key.
    if (EVP_DigestSignInit(keyed_, nullptr, EVP_sha256(), nullptr, pkey) != 1) openssl_failed("EVP_DigestSignInit");
    EVP_PKEY_free(pkey);
    pkey = nullptr;
    reset();
  } catch (...) {
    EVP_PKEY_free(pkey);  // no destructor runs for a half-built object
    EVP_MD_CTX_free(ctx_);
    EVP_MD_CTX_free(keyed_);
    throw;
  }
}

HmacSha256::~HmacSha256() {
  EVP_MD_CTX_free(ctx_);
  EVP_MD_CTX_free(keyed_);
}

void HmacSha256::reset() {
  if (EVP_MD_CTX_copy_ex(ctx_, keyed_) != 1) openssl_failed("EVP_MD_CTX_copy_ex");
}

void HmacSha256::update(const void* data, std::size_t size) {
  if (size != 0 && EVP_DigestSignUpdate(ctx_, data, size) != 1) openssl_failed("EVP_DigestSignUpdate");
}

Digest HmacSha256::finish() {
  Digest out;
  std::size_t len = out.size();
  if (EVP_DigestSignFinal(ctx_, out.data(), &len) != 1 || len != out.size()) openssl_failed("EVP_DigestSignFinal");
  return out;
}

Digest HmacSha256::of(const std::uint8_t* key, std::size_t key_size, const void* data, std::size_t size) {
  HmacSha256 h(key, key_size);
  h.update(data, size);
  return h.finish();
}

}  // namespace idem::core
