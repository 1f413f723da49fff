// spi.cpp: kept-plan execution for the store's statements, as the owner of
// the table they read or write.
#include "spi.hpp"

#include <cstring>

extern "C" {
#include "lib/stringinfo.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
}

#include "../core/error.hpp"
#include "extension.hpp"
#include "store.hpp"

namespace idem::pg {

namespace {

// The plan of one store statement for one table. stale: the table changed
// (a rename, an index, a column) since it was prepared; it is freed and
// prepared again at its next use, never inside the invalidation callback.
struct PlanKey {
  const StoreStatement* statement;
  Oid table;
};
struct Prepared {
  PlanKey key;  // hash key
  SPIPlanPtr plan;
  bool stale;
};
HTAB* prepared = nullptr;

void mark_stale(Datum, Oid relid) noexcept {
  if (prepared == nullptr) return;
  HASH_SEQ_STATUS seq;
  hash_seq_init(&seq, prepared);
  while (auto* p = static_cast<Prepared*>(hash_seq_search(&seq)))
    if (relid == InvalidOid || p->key.table == relid) p->stale = true;
}

HTAB* prepared_plans() {
  if (prepared != nullptr) return prepared;
  HASHCTL ctl;
  std::memset(&ctl, 0, sizeof ctl);
  ctl.keysize = sizeof(PlanKey);
  ctl.entrysize = sizeof(Prepared);
  ctl.hcxt = CacheMemoryContext;
  prepared = hash_create("idempotency store statements", 32, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
  return prepared;
}

// The caller's user and security context, and the GUC nest level opened
// for the owner (-1: no switch).
struct Switched {
  Oid user;
  int security;
  int nest;
};

// Becomes role owner (InvalidOid: stays), in a security-restricted
// operation with search_path = pg_catalog, pg_temp, as PostgreSQL runs
// REFRESH MATERIALIZED VIEW as a view's owner: what the owner attached to
// the table (a trigger, a rule) runs with the owner's rights, resolves no
// name through the caller's search_path, and can change no setting, role
// or session state that outlives the statement.
Switched switch_to(Oid owner) {
  Switched s = {InvalidOid, 0, -1};
  GetUserIdAndSecContext(&s.user, &s.security);
  if (!OidIsValid(owner)) return s;
  SetUserIdAndSecContext(owner, s.security | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
  s.nest = NewGUCNestLevel();
  (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                          false);
  return s;
}

// Undoes switch_to: the settings changed meanwhile, then the user.
void switch_back(const Switched& s) {
  if (s.nest >= 0) AtEOXact_GUC(false, s.nest);
  SetUserIdAndSecContext(s.user, s.security);
}

// A kept plan of sql, parsed as role owner (whose privileges the statement
// runs with: the caller may not even see the table's schema); call inside
// an SPI connection. An error raised while switched aborts the
// (sub)transaction, which restores the user as it was.
SPIPlanPtr keep(const char* sql, int nargs, const Oid* types, Oid owner) {
  const Switched s = switch_to(owner);
  SPIPlanPtr plan = SPI_prepare(sql, nargs, const_cast<Oid*>(types));
  switch_back(s);
  if (plan == nullptr)
    throw core::Error(core::sqlstate::internal_error, "could not prepare an idempotency statement",
                      SPI_result_code_string(SPI_result));
  if (SPI_keepplan(plan) != 0) throw core::Error(core::sqlstate::internal_error, "SPI_keepplan failed");
  return plan;
}

// st's SQL with @store@ replaced by the qualified name of table; palloc'd.
const char* for_table(const StoreStatement& st, Oid table) {
  const char* name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(table)), get_rel_name(table));
  StringInfoData sql;
  initStringInfo(&sql);
  for (const char* s = st.sql; *s != '\0';) {
    const char* at = std::strstr(s, "@store@");
    if (at == nullptr) {
      appendStringInfoString(&sql, s);
      break;
    }
    appendBinaryStringInfo(&sql, s, static_cast<int>(at - s));
    appendStringInfoString(&sql, name);
    s = at + std::strlen("@store@");
  }
  return sql.data;
}

// Runs plan as role owner, then copies the first row out (see execute).
uint64 run(SPIPlanPtr plan, bool latest_snapshot, Oid owner, const Datum* values, const char* nulls, Datum* row,
           bool* row_nulls, MemoryContext caller) {
  // The caller was authorized for the namespace (policy.cpp); the table's
  // privileges are the owner's. An error raised while switched aborts the
  // (sub)transaction, which restores the user as it was.
  const Switched s = switch_to(owner);
  const int rc = latest_snapshot ? SPI_execute_snapshot(plan, const_cast<Datum*>(values), nulls, GetLatestSnapshot(),
                                                        InvalidSnapshot, true, false, 1)
                                 : SPI_execute_plan(plan, const_cast<Datum*>(values), nulls, false, 0);
  switch_back(s);
  if (rc < 0)
    throw core::Error(core::sqlstate::internal_error, "an idempotency statement failed", SPI_result_code_string(rc));
  const uint64 processed = SPI_processed;
  if (row != nullptr && SPI_tuptable != nullptr) {
    const TupleDesc desc = SPI_tuptable->tupdesc;
    for (int i = 0; i < desc->natts; ++i) {
      row_nulls[i] = true;
      if (processed == 0) continue;
      const Datum d = SPI_getbinval(SPI_tuptable->vals[0], desc, i + 1, &row_nulls[i]);
      if (!row_nulls[i]) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        MemoryContext spi = MemoryContextSwitchTo(caller);
        row[i] = datumCopy(d, att->attbyval, att->attlen);
        MemoryContextSwitchTo(spi);
      }
    }
  }
  return processed;
}

}  // namespace

uint64 execute(Statement& st, const Datum* values, const char* nulls, Datum* row, bool* row_nulls) {
  // Whatever is returned must outlive SPI_finish: copy it into this context.
  MemoryContext caller = CurrentMemoryContext;
  const Registry r = registry();
  if (SPI_connect() != SPI_OK_CONNECT) throw core::Error(core::sqlstate::internal_error, "SPI_connect failed");
  const Oid owner = r.owner;
  if (st.plan == nullptr) st.plan = keep(st.sql, st.nargs, st.types, owner);
  const uint64 processed = run(st.plan, st.latest_snapshot, owner, values, nulls, row, row_nulls, caller);
  SPI_finish();
  return processed;
}

uint64 execute(const StoreStatement& st, const Store& store, const Datum* values, const char* nulls, Datum* row,
               bool* row_nulls) {
  MemoryContext caller = CurrentMemoryContext;
  const PlanKey key{&st, store.table};
  const Oid owner = store.owner;
  if (SPI_connect() != SPI_OK_CONNECT) throw core::Error(core::sqlstate::internal_error, "SPI_connect failed");
  auto* p = static_cast<Prepared*>(hash_search(prepared_plans(), &key, HASH_FIND, nullptr));
  if (p != nullptr && p->stale) {
    SPIPlanPtr old = p->plan;
    (void)hash_search(prepared_plans(), &key, HASH_REMOVE, nullptr);
    p = nullptr;
    SPI_freeplan(old);
  }
  if (p == nullptr) {
    SPIPlanPtr plan = keep(for_table(st, store.table), st.nargs, st.types, owner);
    p = static_cast<Prepared*>(hash_search(prepared_plans(), &key, HASH_ENTER, nullptr));
    p->plan = plan;
    p->stale = false;
  }
  const uint64 processed = run(p->plan, st.latest_snapshot, owner, values, nulls, row, row_nulls, caller);
  SPI_finish();
  return processed;
}

void statements_relation_changed(Oid relid) noexcept { mark_stale(0, relid); }

}  // namespace idem::pg
