// policy.hpp: what a namespace allows: its settings from the registry
// (idem_namespace_config, falling back to idem_defaults) and who may use it
// (idem_namespace_grant). Every store function asks here first.
#pragma once

#include "pointers.hpp"
#include "postgres.hpp"

extern "C" {
#include "datatype/timestamp.h"
}

namespace idem::pg {

// The settings every call on one namespace follows. Trivially copyable: it
// is returned by value, because the cache it comes from may be cleared by an
// invalidation at any later catalog access.
struct Policy {
  bool registered;
  bool hash_keys;
  bool store_request;
  bool has_replay_window;  // the namespace sets one, a limit a call may only shorten
  Interval replay_window;  // the namespace's, else the defaults'
  int64 lease_us;          // in_progress_lease in microseconds; 0: never taken over
  int64 max_payload_bytes;
  int64 in_flight_wait_ms;  // how long a begin given no wait waits (the defaults')
  Oid store;               // the table the namespace is bound to; InvalidOid: the extension's own
  // The pointer set (pointers.hpp) of what its fingerprint ignores, in the
  // caller's memory context; nullptr: the whole request.
  const void* ignore;
  Size ignore_size;
};

// Whether two policies fingerprint a request alike.
inline bool same_fingerprint(const Policy& a, const Policy& b) {
  return same_pointer_set(a.ignore, a.ignore_size, b.ignore, b.ignore_size);
}

// Whether two policies look a key up alike (the same store, the key in the
// same form) and fingerprint its request alike: a first look made under
// one answers under the other.
inline bool same_lookup(const Policy& a, const Policy& b) {
  return a.store == b.store && a.hash_keys == b.hash_keys && same_fingerprint(a, b);
}

// The settings of namespaces that set none: the row of idem_defaults
// (1.0.0), or, for a 0.9 schema not yet updated, the server settings that
// said them until then. Trivially copyable.
struct Defaults {
  Interval replay_window;
  int64 lease_us;
  bool store_request;
  int64 max_payload_bytes;
  int64 in_flight_wait_ms;
  bool require_registered;
};
Defaults namespace_defaults();

// The policy of namespace ns for the current user. Raises 42501 when the user
// may not use the namespace (neither the store's owner, nor a member of a
// role it was granted to), before anything about its records is read; then
// 42704 when the defaults require registered namespaces and it is not
// registered.
Policy authorize(const text* ns);

// The key as the table holds it: the key itself, or with hash_keys the
// lowercase hex SHA-256 of its UTF-8 bytes (the same in every encoding).
text* stored_key(const text* key, const Policy& policy);

// How messages name a key without printing it: "sha256:" and the first 12
// hex digits of the SHA-256 of its UTF-8 bytes, NUL-terminated in out. The
// same prefix starts the stored key of a hash_keys namespace.
void key_label(const text* key, char (&out)[32]);

// Raises 54000 when payload (a request, result or error, named by what) is
// larger than the namespace allows; checked before anything is written.
void check_payload_size(const Jsonb* payload, const char* what, const text* ns, const Policy& policy);

// Raises 25006 when the transaction cannot write: a read-only transaction,
// or any transaction on a standby. Called by a store function (named by
// function, acting as action) just before the first write it needs, so that
// replays, which write nothing, still work there.
void require_read_write(const text* key, const char* function, const char* action);

// Clears the policy cache when either registry table changes (relcache hook, module.cpp).
void policies_relation_changed(Oid relid) noexcept;

}  // namespace idem::pg
