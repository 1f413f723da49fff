// sha256_test.cpp: Sha256 against FIPS 180 vectors, streaming, reset, and OpenSSL failures.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "core/error.hpp"
#include "core/hex.hpp"
#include "core/sha256.hpp"
#include "support.hpp"

using idem::core::Digest;
using idem::core::Sha256;

// ---- Fault injection -------------------------------------------------------
// The OpenSSL failure paths cannot be reached with a healthy libcrypto, so this
// binary interposes the four EVP entry points Sha256 uses: each forwards to the
// real libcrypto function (found with dlsym(RTLD_NEXT)) unless a test has
// asked it to fail. Every other test in the binary sees plain OpenSSL.
namespace {
bool fail_ctx_new = false;
bool fail_init = false;
bool fail_update = false;
bool fail_final = false;
bool short_final = false;  // final succeeds but reports a 31-byte digest
long live_contexts = 0;    // EVP_MD_CTX_new minus EVP_MD_CTX_free, to catch leaks

template <class Fn>
Fn real(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (p == nullptr) std::abort();
  return reinterpret_cast<Fn>(p);
}

// Resets every injected failure when a test ends, whatever its outcome.
struct Inject {
  Inject() = default;
  ~Inject() { fail_ctx_new = fail_init = fail_update = fail_final = short_final = false; }
};
}  // namespace

extern "C" {
EVP_MD_CTX* EVP_MD_CTX_new(void) {
  static auto fn = real<EVP_MD_CTX* (*)(void)>("EVP_MD_CTX_new");
  if (fail_ctx_new) return nullptr;
  EVP_MD_CTX* ctx = fn();
  if (ctx != nullptr) ++live_contexts;
  return ctx;
}
void EVP_MD_CTX_free(EVP_MD_CTX* ctx) {
  static auto fn = real<void (*)(EVP_MD_CTX*)>("EVP_MD_CTX_free");
  if (ctx != nullptr) --live_contexts;
  fn(ctx);
}
int EVP_DigestInit_ex(EVP_MD_CTX* ctx, const EVP_MD* type, ENGINE* impl) {
  static auto fn = real<int (*)(EVP_MD_CTX*, const EVP_MD*, ENGINE*)>("EVP_DigestInit_ex");
  return fail_init ? 0 : fn(ctx, type, impl);
}
int EVP_DigestUpdate(EVP_MD_CTX* ctx, const void* d, size_t cnt) {
  static auto fn = real<int (*)(EVP_MD_CTX*, const void*, size_t)>("EVP_DigestUpdate");
  return fail_update ? 0 : fn(ctx, d, cnt);
}
int EVP_DigestFinal_ex(EVP_MD_CTX* ctx, unsigned char* md, unsigned int* s) {
  static auto fn = real<int (*)(EVP_MD_CTX*, unsigned char*, unsigned int*)>("EVP_DigestFinal_ex");
  if (fail_final) return 0;
  const int r = fn(ctx, md, s);
  if (short_final && s != nullptr) *s = 31;
  return r;
}
}  // extern "C"

// ---- Helpers ---------------------------------------------------------------
namespace {

std::string hex(const Digest& d) {
  char out[65];
  idem::core::to_hex(d.data(), d.size(), out);
  return out;
}

std::string hex_of(const std::string& s) { return hex(Sha256::of(s.data(), s.size())); }

constexpr const char* kEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char* kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* k448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
constexpr const char* k448Digest =
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
constexpr const char* kMillionA =
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

void expect_openssl_error(const idem::core::Error& e, const char* call) {
  EXPECT_STREQ(e.sqlstate(), "XX000");
  EXPECT_EQ(e.message(), "OpenSSL SHA-256 failure");
  EXPECT_EQ(e.detail(), std::string(call) + " failed.");
}

}  // namespace

// ---- FIPS 180 vectors --------------------------------------------------------
TEST(Sha256, EmptyString) {
  EXPECT_EQ(hex_of(""), kEmpty);
  EXPECT_EQ(hex(Sha256::of(nullptr, 0)), kEmpty);
  Sha256 h;
  EXPECT_EQ(hex(h.finish()), kEmpty);
}

TEST(Sha256, Abc) { EXPECT_EQ(hex_of("abc"), kAbc); }

TEST(Sha256, TwoBlockMessage) { EXPECT_EQ(hex_of(k448), k448Digest); }

TEST(Sha256, OneMillionA) { EXPECT_EQ(hex_of(std::string(1000000, 'a')), kMillionA); }

// ---- Streaming ---------------------------------------------------------------
TEST(Sha256, StreamingByteByByteEqualsOneShot) {
  Sha256 h;
  h.update("a", 1);
  h.update("b", 1);
  h.update("c", 1);
  EXPECT_EQ(hex(h.finish()), kAbc);
}

TEST(Sha256, StreamingInUnevenPiecesEqualsOneShot) {
  std::string msg;
  for (int i = 0; i < 5000; ++i) msg += static_cast<char>('!' + (i * 7) % 90);
  const std::string want = hex_of(msg);
  const std::size_t pieces[] = {1, 63, 64, 65, 0, 127, 128, 129, 1000, 3};
  Sha256 h;
  std::size_t at = 0;
  for (std::size_t k = 0; at < msg.size(); ++k) {
    const std::size_t n = std::min(pieces[k % (sizeof pieces / sizeof pieces[0])], msg.size() - at);
    h.update(msg.data() + at, n);
    at += n;
  }
  EXPECT_EQ(hex(h.finish()), want);
}

TEST(Sha256, ZeroLengthUpdateChangesNothing) {
  Sha256 h;
  h.update(nullptr, 0);
  h.update("abc", 3);
  h.update(nullptr, 0);
  h.update("", 0);
  EXPECT_EQ(hex(h.finish()), kAbc);
}

// ---- Reuse -------------------------------------------------------------------
TEST(Sha256, ResetDiscardsPendingInput) {
  Sha256 h;
  h.update("garbage that must not count", 27);
  h.reset();
  h.update("abc", 3);
  EXPECT_EQ(hex(h.finish()), kAbc);
}

TEST(Sha256, ResetAfterFinishStartsANewDigest) {
  Sha256 h;
  h.update("abc", 3);
  EXPECT_EQ(hex(h.finish()), kAbc);
  h.reset();
  EXPECT_EQ(hex(h.finish()), kEmpty);
  h.reset();
  h.update(k448, std::strlen(k448));
  EXPECT_EQ(hex(h.finish()), k448Digest);
  h.reset();
  h.update("abc", 3);
  EXPECT_EQ(hex(h.finish()), kAbc);
}

TEST(Sha256, DifferentInputsGiveDifferentDigests) {
  EXPECT_NE(hex_of("abc"), hex_of("abd"));
  EXPECT_NE(hex_of("abc"), hex_of(std::string("abc\0", 4)));
}

// ---- OpenSSL failures (injected) ---------------------------------------------
TEST(Sha256Failure, ContextAllocationFailureIsBadAlloc) {
  Inject inject;
  fail_ctx_new = true;
  EXPECT_THROW(Sha256 h, std::bad_alloc);
}

TEST(Sha256Failure, InitFailureInConstructor) {
  Inject inject;
  fail_init = true;
  expect_openssl_error(EXPECT_CORE_ERROR(Sha256 h), "EVP_DigestInit_ex");
}

TEST(Sha256Failure, ContextIsFreedOnDestruction) {
  const long before = live_contexts;
  {
    Sha256 h;
    EXPECT_EQ(live_contexts, before + 1);
    h.update("abc", 3);
    h.finish();
  }
  Sha256::of("abc", 3);
  EXPECT_EQ(live_contexts, before);
}

// When reset() throws inside the constructor no destructor runs, so the
// constructor itself must free the EVP_MD_CTX (this test found that leak).
TEST(Sha256Failure, InitFailureInConstructorFreesTheContext) {
  Inject inject;
  const long before = live_contexts;
  fail_init = true;
  EXPECT_CORE_ERROR(Sha256 h);
  EXPECT_EQ(live_contexts, before) << "the EVP_MD_CTX allocated by the constructor leaked";
}

TEST(Sha256Failure, InitFailureInReset) {
  Inject inject;
  Sha256 h;
  fail_init = true;
  expect_openssl_error(EXPECT_CORE_ERROR(h.reset()), "EVP_DigestInit_ex");
}

TEST(Sha256Failure, UpdateFailure) {
  Inject inject;
  Sha256 h;
  fail_update = true;
  expect_openssl_error(EXPECT_CORE_ERROR(h.update("abc", 3)), "EVP_DigestUpdate");
  // A zero-length update never reaches OpenSSL, so it cannot fail.
  h.update("", 0);
}

TEST(Sha256Failure, FinalFailure) {
  Inject inject;
  Sha256 h;
  h.update("abc", 3);
  fail_final = true;
  expect_openssl_error(EXPECT_CORE_ERROR(h.finish()), "EVP_DigestFinal_ex");
}

TEST(Sha256Failure, FinalWithWrongLengthIsAFailure) {
  Inject inject;
  Sha256 h;
  short_final = true;
  expect_openssl_error(EXPECT_CORE_ERROR(h.finish()), "EVP_DigestFinal_ex");
}

TEST(Sha256Failure, InjectionIsOffAfterwards) {
  EXPECT_EQ(hex_of("abc"), kAbc);
}
