// hmac.cpp: the OpenSSL calls behind HmacSha256, with OpenSSL failures as
// exceptions. OpenSSL 3's EVP_MAC keeps the keyed state and starts a new
// message from it when initialised without a key; OpenSSL 1.1's HMAC_CTX
// does the same.
#include "hmac.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
#include <openssl/core_names.h>
#include <openssl/params.h>
#endif

#include <new>

#include "error.hpp"

namespace idem::core {

namespace {

[[noreturn]] void openssl_failed(const char* what) {
  throw Error(sqlstate::internal_error, "OpenSSL HMAC-SHA256 failure", std::string(what) + " failed.");
}

#if OPENSSL_VERSION_NUMBER >= 0x30000000L
using Ctx = EVP_MAC_CTX;

// The HMAC implementation, fetched once per process.
EVP_MAC* hmac() {
  static EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac == nullptr) openssl_failed("EVP_MAC_fetch(HMAC)");
  return mac;
}

Ctx* new_keyed(const std::uint8_t* key, std::size_t size) {
  Ctx* ctx = EVP_MAC_CTX_new(hmac());
  if (ctx == nullptr) throw std::bad_alloc();
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(ctx, key, size, params) != 1) {
    EVP_MAC_CTX_free(ctx);
    openssl_failed("EVP_MAC_init");
  }
  return ctx;
}
void free_ctx(Ctx* ctx) { EVP_MAC_CTX_free(ctx); }
void restart(Ctx* ctx) {
  if (EVP_MAC_init(ctx, nullptr, 0, nullptr) != 1) openssl_failed("EVP_MAC_init");
}
void add(Ctx* ctx, const void* data, std::size_t size) {
  if (EVP_MAC_update(ctx, static_cast<const unsigned char*>(data), size) != 1) openssl_failed("EVP_MAC_update");
}
std::size_t final(Ctx* ctx, std::uint8_t* out, std::size_t room) {
  std::size_t len = 0;
  if (EVP_MAC_final(ctx, out, &len, room) != 1) openssl_failed("EVP_MAC_final");
  return len;
}
#else
using Ctx = HMAC_CTX;

Ctx* new_keyed(const std::uint8_t* key, std::size_t size) {
  Ctx* ctx = HMAC_CTX_new();
  if (ctx == nullptr) throw std::bad_alloc();
  if (HMAC_Init_ex(ctx, key, static_cast<int>(size), EVP_sha256(), nullptr) != 1) {
    HMAC_CTX_free(ctx);
    openssl_failed("HMAC_Init_ex");
  }
  return ctx;
}
void free_ctx(Ctx* ctx) { HMAC_CTX_free(ctx); }
void restart(Ctx* ctx) {
  if (HMAC_Init_ex(ctx, nullptr, 0, nullptr, nullptr) != 1) openssl_failed("HMAC_Init_ex");
}
void add(Ctx* ctx, const void* data, std::size_t size) {
  if (HMAC_Update(ctx, static_cast<const unsigned char*>(data), size) != 1) openssl_failed("HMAC_Update");
}
std::size_t final(Ctx* ctx, std::uint8_t* out, std::size_t) {
  unsigned int len = 0;
  if (HMAC_Final(ctx, out, &len) != 1) openssl_failed("HMAC_Final");
  return len;
}
#endif

Ctx* as_ctx(void* p) { return static_cast<Ctx*>(p); }

}  // namespace

HmacSha256::HmacSha256(const std::uint8_t* key, std::size_t size) : ctx_(new_keyed(key, size)) {}

HmacSha256::~HmacSha256() { free_ctx(as_ctx(ctx_)); }

void HmacSha256::reset() { restart(as_ctx(ctx_)); }

void HmacSha256::update(const void* data, std::size_t size) {
  if (size != 0) add(as_ctx(ctx_), data, size);
}

Digest HmacSha256::finish() {
  Digest out;
  if (final(as_ctx(ctx_), out.data(), out.size()) != out.size()) openssl_failed("the HMAC's length");
  return out;
}

Digest HmacSha256::of(const std::uint8_t* key, std::size_t key_size, const void* data, std::size_t size) {
  HmacSha256 h(key, key_size);
  h.update(data, size);
  return h.finish();
}

}  // namespace idem::core
