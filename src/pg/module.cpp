// module.cpp: the library's identity for PostgreSQL's loader and its
// start-up: the GUCs (settings.cpp), the cache invalidation hooks, the
// transaction callbacks and, when preloaded, the shared memory for the
// counters.
#include "postgres.hpp"

extern "C" {
#include "utils/inval.h"
}

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

namespace {
// One relcache hook for every cache of the library: PostgreSQL has a few
// slots for the whole backend and Citus takes several of them.
void relation_changed(Datum, Oid relid) noexcept {
  idem::pg::extension_relation_changed(relid);
  idem::pg::store_relation_changed(relid);
  idem::pg::statements_relation_changed(relid);
  idem::pg::policies_relation_changed(relid);
  idem::pg::citus_relation_changed(relid);
}
}  // namespace

// Runs once per backend when the library is loaded; nothing here can throw.
void _PG_init(void) {
  idem::pg::define_settings();
  CacheRegisterRelcacheCallback(relation_changed, 0);
  idem::pg::register_claim_callbacks();
  if (process_shared_preload_libraries_in_progress) idem::pg::request_stats_memory();
}
