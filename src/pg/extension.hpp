// extension.hpp: the extension's own relations as this backend sees them:
// its record table and that table's primary key, the namespace registry
// and the lock secret (in idempotency_internal from 1.0.0, in the schema
// itself in 0.9; 0.9 has no defaults table). Looked up once per backend and
// again after any invalidation that concerns them. A schema older than
// 0.9.0 is refused: this library serves releases N and N-1.
#pragma once

#include "postgres.hpp"

namespace idem::pg {

// Forgets the cached OIDs and lock secret when one of them changes (relcache hook, module.cpp).
void extension_relation_changed(Oid relid) noexcept;

// The namespace registry's tables and the store's owner.
struct Registry {
  Oid owner;     // owner of idempotency_record: the registry is read, and its table written, as this role
  Oid config;    // idem_namespace_config
  Oid grant;     // idem_namespace_grant
  Oid defaults;  // idem_defaults (1.0.0): the settings of namespaces that set none; InvalidOid before
};
Registry registry();

// The extension's record table and its primary key (OIDs). Raises 55000
// when the store is not installed or its schema is older than 0.9.0, and
// 0A000 when Citus manages the extension's tables.
struct OwnTable {
  Oid table;
  Oid pkey;
};
OwnTable own_table();

// Raises 55000 for a schema older than this library serves (0.9.0), with
// the update to run.
[[noreturn]] void schema_too_old();

// The lock secret's 32 bytes, or nullptr while its table has no row.
// Points into this backend's cache: copy what is needed before the next
// catalog access.
const uint8* lock_secret();
constexpr int lock_secret_size = 32;

}  // namespace idem::pg
