// spi.hpp: running the store's statements through SPI with plans prepared
// once per backend and kept (SPI_prepare + SPI_keepplan): fixed statements
// on the extension's registry, and statements on a store's table, prepared
// once for each table they run on.
#pragma once

#include "postgres.hpp"

extern "C" {
#include "executor/spi.h"
}

namespace idem::pg {

struct Store;

// A fixed statement and its kept plan; define one per statement as a
// static. The SQL names every object and operator with its schema (the
// extension's own and pg_catalog), so the caller's search_path never matters.
struct Statement {
  const char* sql;
  int nargs;
  Oid types[8];
  SPIPlanPtr plan;  // prepared on first use, kept for the backend's life
  bool latest_snapshot = false;  // read with a new snapshot, not the transaction's (read-only statements)
};

// Executes st with the arguments (nulls: ' ' or 'n' per argument, as SPI
// wants) inside its own SPI connection, as the extension's owner (see
// registry()), and returns the number of rows processed. When row is given,
// row[i] and row_nulls[i] receive column i of the first row, copied into the
// caller's memory context; the arrays must have one slot per column.
uint64 execute(Statement& st, const Datum* values, const char* nulls, Datum* row = nullptr,
               bool* row_nulls = nullptr);

// A statement on a store's table, whose SQL says @store@ where the table's
// schema-qualified name goes; prepared for each table it runs on (and again
// when that table changes, a rename included), kept meanwhile. Define one
// per statement as a static.
struct StoreStatement {
  const char* sql;
  int nargs;
  Oid types[10];
  bool latest_snapshot = false;
};

// Executes st on store's table as the table's owner, as execute above.
uint64 execute(const StoreStatement& st, const Store& store, const Datum* values, const char* nulls,
               Datum* row = nullptr, bool* row_nulls = nullptr);

// Marks the prepared statements of a changed table stale (relcache hook, module.cpp).
void statements_relation_changed(Oid relid) noexcept;

}  // namespace idem::pg
