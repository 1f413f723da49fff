// spi.hpp: running the store's statements through SPI with plans prepared
// once per backend and kept (SPI_prepare + SPI_keepplan).
#pragma once

#include "postgres.hpp"

extern "C" {
#include "executor/spi.h"
}

namespace idem::pg {

// A statement and its kept plan; define one per statement as a static.
// The SQL names every object with its schema (the extension's own and
// pg_catalog), so the caller's search_path never matters.
struct Statement {
  const char* sql;
  int nargs;
  Oid types[6];
  SPIPlanPtr plan;  // prepared on first use, kept for the backend's life
};

// Executes st with the arguments (nulls: ' ' or 'n' per argument, as SPI
// wants) inside its own SPI connection and returns the number of rows
// processed. For a statement returning one column, *first receives that
// column of the first row, copied into the caller's memory context.
uint64 execute(Statement& st, const Datum* values, const char* nulls, Datum* first = nullptr,
               bool* first_null = nullptr);

}  // namespace idem::pg
