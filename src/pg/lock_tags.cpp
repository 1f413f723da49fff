// lock_tags.cpp: the keyed lock tags and the locks taken with them (see
// lock_tags.hpp). The HMAC is keyed once per backend with the secret and
// reinitialised for each tag; the last namespace's tag is kept, since most
// backends serve one namespace.
#include "lock_tags.hpp"

#include <cstring>

extern "C" {
#include "common/hashfn.h"
#include "utils/resowner.h"
}

#include "../core/hmac.hpp"
#include "extension.hpp"

namespace idem::pg {

namespace {

// Mark our locks in pg_locks (objsubid) and keep them apart from
// pg_advisory_lock(bigint) (1) and pg_advisory_lock(int, int) (2).
constexpr uint16 key_lock_field4 = 0x4944;        // "ID"
constexpr uint16 namespace_lock_field4 = 0x494E;  // "IN"

// The HMAC keyed with the store's secret (NULL: none yet, or a schema
// without one), and the secret it was keyed with. Per backend, like the
// SHA-256 context: never freed, so an error leaves nothing to release.
core::HmacSha256* keyed = nullptr;
uint8 keyed_with[lock_secret_size];
// The last namespace's tag bits: valid while keyed is the HMAC they were
// computed with.
char last_namespace[64];
int last_namespace_len = -1;
uint64 last_namespace_bits;

// The HMAC for the installed secret (re)keyed when the secret changed (a
// reinstalled extension), or nullptr when the schema has none.
core::HmacSha256* hmac() {
  const uint8* secret = lock_secret();
  if (secret == nullptr) {
    delete keyed;
    keyed = nullptr;
    last_namespace_len = -1;
    return nullptr;
  }
  if (keyed != nullptr && std::memcmp(secret, keyed_with, lock_secret_size) == 0) return keyed;
  std::memcpy(keyed_with, secret, lock_secret_size);
  auto* fresh = new core::HmacSha256(keyed_with, lock_secret_size);
  delete keyed;
  keyed = fresh;
  last_namespace_len = -1;
  return keyed;
}

// Adds a text to the HMAC, after its length as 4 bytes big-endian.
void hmac_text(core::HmacSha256* h, const text* t) {
  const uint32 len = VARSIZE_ANY_EXHDR(t);
  const uint8 be[4] = {static_cast<uint8>(len >> 24), static_cast<uint8>(len >> 16), static_cast<uint8>(len >> 8),
                       static_cast<uint8>(len)};
  h->update(be, sizeof be);
  h->update(VARDATA_ANY(t), len);
}

// 64 bits that name (kind, namespace[, key]) in a lock tag: keyed when the
// schema has a secret (the first 8 bytes, big-endian, of HMAC-SHA256 over
// kind and the length-prefixed texts), otherwise the unkeyed hash of 0.4.
uint64 tag_bits(char kind, const text* ns, const text* key) {
  core::HmacSha256* h = hmac();
  const int ns_len = VARSIZE_ANY_EXHDR(ns);
  const bool cacheable = kind == 'n' && h != nullptr && ns_len <= static_cast<int>(sizeof last_namespace);
  if (cacheable && ns_len == last_namespace_len && std::memcmp(last_namespace, VARDATA_ANY(ns), ns_len) == 0)
    return last_namespace_bits;
  if (h != nullptr) {
    h->reset();
    h->update(&kind, 1);
    hmac_text(h, ns);
    if (key != nullptr) hmac_text(h, key);
    const core::Digest d = h->finish();
    uint64 bits = 0;
    for (int i = 0; i < 8; ++i) bits = bits << 8 | d[i];
    if (cacheable) {
      std::memcpy(last_namespace, VARDATA_ANY(ns), ns_len);
      last_namespace_len = ns_len;
      last_namespace_bits = bits;
    }
    return bits;
  }
  uint64 bits = hash_bytes_extended(reinterpret_cast<const unsigned char*>(VARDATA_ANY(ns)), VARSIZE_ANY_EXHDR(ns),
                                    kind == 'k' ? 0 : 1);
  if (key != nullptr)
    bits = hash_bytes_extended(reinterpret_cast<const unsigned char*>(VARDATA_ANY(key)), VARSIZE_ANY_EXHDR(key),
                               bits);
  return bits;
}

LOCKTAG tag_of(uint64 bits, uint16 field4) {
  LOCKTAG tag;
  SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(bits >> 32), static_cast<uint32>(bits), field4);
  return tag;
}

// Takes tag in mode for the current (sub)transaction, not for the portal
// whose execution asked (a cursor's fetch runs under the cursor's resource
// owner): these locks stand for claims and for reads of a namespace's
// settings, which the claim registry and the transaction keep, so they must
// be released with that (sub)transaction and no earlier. A later fetch of
// the cursor that fails inside a savepoint releases the cursor's own locks.
// false: dont_wait and another transaction holds it.
bool acquire(const LOCKTAG& tag, LOCKMODE mode, bool dont_wait) {
  ResourceOwner portal_owner = CurrentResourceOwner;
  CurrentResourceOwner = CurTransactionResourceOwner;
  const LockAcquireResult r = LockAcquire(&tag, mode, false, dont_wait);
  CurrentResourceOwner = portal_owner;
  return r != LOCKACQUIRE_NOT_AVAIL;
}

}  // namespace

bool try_lock_key(const text* ns, const text* key, LOCKTAG* tag) {
  *tag = tag_of(tag_bits('k', ns, key), key_lock_field4);
  return acquire(*tag, ExclusiveLock, true);
}

void unlock_key(const LOCKTAG& tag) {
  ResourceOwner portal_owner = CurrentResourceOwner;
  CurrentResourceOwner = CurTransactionResourceOwner;
  LockRelease(&tag, ExclusiveLock, false);
  CurrentResourceOwner = portal_owner;
}

bool key_lock_holder(const text* ns, const text* key, int* pid) {
  const LOCKTAG tag = tag_of(tag_bits('k', ns, key), key_lock_field4);
  const LockData* data = GetLockStatusData();
  for (int i = 0; i < data->nelements; ++i) {
    const LockInstanceData& held = data->locks[i];
    if ((held.holdMask & LOCKBIT_ON(ExclusiveLock)) != 0 && std::memcmp(&held.locktag, &tag, sizeof tag) == 0) {
      *pid = held.pid;
      return true;
    }
  }
  return false;
}

void lock_namespace(const text* ns, LOCKMODE mode) {
  (void)acquire(tag_of(tag_bits('n', ns, nullptr), namespace_lock_field4), mode, false);
}

bool try_lock_namespace(const text* ns, LOCKMODE mode) {
  return acquire(tag_of(tag_bits('n', ns, nullptr), namespace_lock_field4), mode, true);
}

}  // namespace idem::pg
