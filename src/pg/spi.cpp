// spi.cpp: kept-plan execution for the store's statements, as the store's
// owner.
#include "spi.hpp"

extern "C" {
#include "utils/snapmgr.h"
}

#include "../core/error.hpp"
#include "record.hpp"

namespace idem::pg {

uint64 execute(Statement& st, const Datum* values, const char* nulls, Datum* row, bool* row_nulls) {
  // Whatever is returned must outlive SPI_finish: copy it into this context.
  MemoryContext caller = CurrentMemoryContext;
  const Registry r = registry();
  if (SPI_connect() != SPI_OK_CONNECT) throw core::Error(core::sqlstate::internal_error, "SPI_connect failed");
  if (st.plan == nullptr) {
    SPIPlanPtr plan = SPI_prepare(st.sql, st.nargs, st.types);
    if (plan == nullptr)
      throw core::Error(core::sqlstate::internal_error, "could not prepare an idempotency statement",
                        SPI_result_code_string(SPI_result));
    if (SPI_keepplan(plan) != 0) throw core::Error(core::sqlstate::internal_error, "SPI_keepplan failed");
    st.plan = plan;
  }
  // The caller was authorized for the namespace (policy.cpp); the table's
  // privileges are the owner's. An error raised while switched aborts the
  // (sub)transaction, which restores the user as it was.
  Oid user;
  int security;
  GetUserIdAndSecContext(&user, &security);
  if (r.installed) SetUserIdAndSecContext(r.owner, security | SECURITY_LOCAL_USERID_CHANGE);
  const int rc = st.latest_snapshot ? SPI_execute_snapshot(st.plan, const_cast<Datum*>(values), nulls,
                                                           GetLatestSnapshot(), InvalidSnapshot, true, false, 1)
                                    : SPI_execute_plan(st.plan, const_cast<Datum*>(values), nulls, false, 0);
  SetUserIdAndSecContext(user, security);
  if (rc < 0)
    throw core::Error(core::sqlstate::internal_error, "an idempotency statement failed",
                      SPI_result_code_string(rc));
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
  SPI_finish();
  return processed;
}

}  // namespace idem::pg
