// module.cpp: the library's identity for PostgreSQL's loader and its
// start-up: the GUCs (settings.cpp), the cache invalidation hooks, the
// transaction callbacks and, when preloaded, the shared memory for the
// counters.
#include "postgres.hpp"

#include "citus.hpp"
#include "claims.hpp"
#include "compat.hpp"  // IDEM_PG_MODULE_MAGIC
#include "policy.hpp"
#include "spi.hpp"
#include "extension.hpp"
#include "settings.hpp"
#include "stats.hpp"
#include "store.hpp"

extern "C" {
IDEM_PG_MODULE_MAGIC;
void _PG_init(void);
}

// Runs once per backend when the library is loaded; nothing here can throw.
void _PG_init(void) {
  idem::pg::define_settings();
  idem::pg::register_extension_invalidation();
  idem::pg::register_store_invalidation();
  idem::pg::register_statement_invalidation();
  idem::pg::register_policy_invalidation();
  idem::pg::register_claim_callbacks();
  idem::pg::register_citus_invalidation();
  if (process_shared_preload_libraries_in_progress) idem::pg::request_stats_memory();
}
