// extension.hpp: the extension's own relations as this backend sees them:
// its record table and that table's primary key, the namespace registry,
// the lock secret, and what the installed schema has (0.3.0's has no
// registry, 0.4's no fence, 0.5.0's no store binding, 0.9's no defaults
// table; from 1.0.0 the lock secret is in idempotency_internal). Looked up once per
// backend and again after any invalidation that concerns them.
#pragma once

#include "postgres.hpp"

namespace idem::pg {

// Forgets the cached OIDs and lock secret when one of them changes (relcache hook, module.cpp).
void extension_relation_changed(Oid relid) noexcept;

// The namespace registry's tables and the store's owner. installed is false
// while the schema is still 0.3.0's (the library was updated, the extension
// not yet): then there is no registry, and the caller's own privileges
// apply. binds is false while it is older than 0.6.0: namespaces have no
// store of their own then.
struct Registry {
  bool installed;
  bool binds;
  bool fingerprints;  // 0.9.0 or later: idem_namespace_config.fingerprint_ignore
  Oid owner;     // owner of idempotency_record: the registry is read, and its table written, as this role
  Oid config;    // idem_namespace_config
  Oid grant;     // idem_namespace_grant
  Oid defaults;  // idem_defaults (1.0.0): the settings of namespaces that set none; InvalidOid before
};
Registry registry();

// The extension's record table and its primary key (OIDs), and whether the
// schema is 0.5.0's or later: records carry a fence, and lock tags are
// keyed with the secret. Raises 55000 when the store is not installed and
// 0A000 when Citus manages the extension's tables.
struct OwnTable {
  Oid table;
  Oid pkey;
  bool fenced;
};
OwnTable own_table();

// Whether the installed schema is 0.5.0's or later (own_table().fenced).
bool fenced_schema();

// The lock secret's 32 bytes, or nullptr for a schema without one (0.4).
// Points into this backend's cache: copy what is needed before the next
// catalog access.
const uint8* lock_secret();
constexpr int lock_secret_size = 32;

}  // namespace idem::pg
