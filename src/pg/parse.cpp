// parse.cpp: idem_parse(namespace, raw), validation of a caller-supplied key,
// and idem_header_key(namespace, header), the key in an Idempotency-Key
// header field.
#include "postgres.hpp"  // first: PostgreSQL headers need postgres.h before them

#include <cstdio>

extern "C" {
#include "access/htup_details.h"
#include "funcapi.h"
}

#include "../core/error.hpp"
#include "../core/header.hpp"
#include "../core/key.hpp"
#include "guard.hpp"
#include "text.hpp"

using namespace idem;

// NULL raw is an absent header, not an error: it gives NULL. The namespace
// is checked first, so a bad namespace fails even when the key is absent.
IDEM_FUNCTION(idem_parse) {
  pg::namespace_arg(fcinfo, 0);
  if (PG_ARGISNULL(1)) PG_RETURN_NULL();
  const core::Slice key = core::parse_key(pg::utf8_of(PG_GETARG_TEXT_PP(1)));
  PG_RETURN_TEXT_P(pg::text_of_utf8(key));
}

// (key, reason): the key in the header, or NULL and why the header holds
// none (NULL reason: no header at all). A bad header is the client's
// mistake, answered, not raised, so that idem_http_key needs no exception
// block (which a parallel worker could not run); a bad namespace is the
// service's bug and raises.
IDEM_FUNCTION(idem_header_key) {
  pg::namespace_arg(fcinfo, 0);
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    throw core::Error(core::sqlstate::internal_error, "idem_header_key must return a record");
  Datum values[2] = {0, 0};
  bool nulls[2] = {true, true};
  if (!PG_ARGISNULL(1) && !pg::convertible_to_utf8(PG_GETARG_TEXT_PP(1))) {
    // Only a SQL_ASCII database lets such bytes in; the client sent them.
    values[1] = CStringGetTextDatum("The Idempotency-Key field holds bytes that are not UTF-8.");
    nulls[1] = false;
  } else if (!PG_ARGISNULL(1)) {
    const core::Slice header = pg::utf8_of(PG_GETARG_TEXT_PP(1));
    auto* buffer = static_cast<char*>(palloc(header.size + 1));
    core::Slice key{nullptr, 0};
    char reason[1024] = "";
    // Only the core runs in here: the reason is copied out of the exception
    // before any PostgreSQL call.
    try {
      key = core::header_key(header, buffer);
    } catch (const core::Error& e) {
      std::snprintf(reason, sizeof reason, "%s", e.detail().c_str());
    }
    if (reason[0] == '\0')
      values[0] = PointerGetDatum(pg::text_of_utf8(key)), nulls[0] = false;
    else
      values[1] = CStringGetTextDatum(reason), nulls[1] = false;
  }
  return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
}
