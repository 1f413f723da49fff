// spi.cpp: kept-plan execution for the store's statements.
#include "spi.hpp"

#include "../core/error.hpp"

namespace idem::pg {

uint64 execute(Statement& st, const Datum* values, const char* nulls, Datum* first, bool* first_null) {
  // Whatever is returned must outlive SPI_finish: copy it into this context.
  MemoryContext caller = CurrentMemoryContext;
  if (SPI_connect() != SPI_OK_CONNECT) throw core::Error(core::sqlstate::internal_error, "SPI_connect failed");
  if (st.plan == nullptr) {
    SPIPlanPtr plan = SPI_prepare(st.sql, st.nargs, st.types);
    if (plan == nullptr)
      throw core::Error(core::sqlstate::internal_error, "could not prepare an idempotency statement",
                        SPI_result_code_string(SPI_result));
    if (SPI_keepplan(plan) != 0) throw core::Error(core::sqlstate::internal_error, "SPI_keepplan failed");
    st.plan = plan;
  }
  const int rc = SPI_execute_plan(st.plan, const_cast<Datum*>(values), nulls, false, 0);
  if (rc < 0)
    throw core::Error(core::sqlstate::internal_error, "an idempotency statement failed",
                      SPI_result_code_string(rc));
  const uint64 processed = SPI_processed;
  if (first != nullptr) {
    *first_null = true;
    if (processed > 0 && SPI_tuptable != nullptr) {
      const Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, first_null);
      if (!*first_null) {
        Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, 0);
        MemoryContext spi = MemoryContextSwitchTo(caller);
        *first = datumCopy(d, att->attbyval, att->attlen);
        MemoryContextSwitchTo(spi);
      }
    }
  }
  SPI_finish();
  return processed;
}

}  // namespace idem::pg
