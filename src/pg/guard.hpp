// guard.hpp: the single door between PostgreSQL and C++.
//
// Every SQL-callable function is defined with IDEM_FUNCTION, which wraps its
// body in guard(): a C++ exception never unwinds into PostgreSQL's frames; it
// is caught, copied into fixed buffers, and re-raised with ereport(ERROR)
// after the catch block has ended. Callbacks that PostgreSQL calls (a
// transaction callback) go through guard_callback() the same way. The other
// half of the rule (a PostgreSQL longjmp never skips a live C++ destructor)
// is a discipline for bodies, explained in docs/internals.md.
#pragma once

#include "postgres.hpp"

namespace idem::pg {

using Body = Datum (*)(FunctionCallInfo fcinfo);

// Runs body(fcinfo); turns any C++ exception into an ERROR with a SQLSTATE.
Datum guard(Body body, FunctionCallInfo fcinfo);

// Runs body(arg) the same way, for callbacks that return nothing.
void guard_callback(void (*body)(void* arg), void* arg);

}  // namespace idem::pg

// Defines the C entry point NAME for CREATE FUNCTION ... AS 'MODULE_PATHNAME',
// 'NAME' and opens the definition of its body, which runs inside guard().
#define IDEM_FUNCTION(NAME)                                                       \
  static Datum NAME##_body(FunctionCallInfo fcinfo);                              \
  extern "C" {                                                                    \
  PG_FUNCTION_INFO_V1(NAME);                                                      \
  Datum NAME(PG_FUNCTION_ARGS) { return ::idem::pg::guard(NAME##_body, fcinfo); } \
  }                                                                               \
  static Datum NAME##_body(FunctionCallInfo fcinfo)
