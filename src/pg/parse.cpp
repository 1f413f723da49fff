// parse.cpp: idem_parse(namespace, raw), validation of a caller-supplied key.
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
