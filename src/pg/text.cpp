// text.cpp: encoding conversion at the boundary and the namespace argument.
#include "text.hpp"

#include <cstring>

#include "../core/error.hpp"
#include "../core/key.hpp"
#include "../core/namespace.hpp"

namespace idem::pg {

core::Slice utf8_of(const char* s, int len) {
  const char* u = pg_server_to_any(s, len, PG_UTF8);
  return {u, u == s ? static_cast<std::size_t>(len) : std::strlen(u)};
}

core::Slice utf8_of(const text* t) { return utf8_of(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)); }

bool convertible_to_utf8(const text* t) {
  return GetDatabaseEncoding() != PG_SQL_ASCII ||
         pg_verify_mbstr(PG_UTF8, VARDATA_ANY(t), static_cast<int>(VARSIZE_ANY_EXHDR(t)), true);
}

text* text_of_utf8(core::Slice s) {
  const int len = static_cast<int>(s.size);
  const char* server = pg_any_to_server(s.data, len, PG_UTF8);
  return cstring_to_text_with_len(server, server == s.data ? len : static_cast<int>(std::strlen(server)));
}

std::string string_of(const text* t) { return std::string(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)); }

bool same_bytes(const struct varlena* a, const struct varlena* b) noexcept {
  return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
         std::memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

text* namespace_arg(FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno))
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency namespace must not be null",
                      "Pass a namespace of 1 to 64 characters: a-z, 0-9, \"-\" and \"_\".");
  text* ns = PG_GETARG_TEXT_PP(argno);
  core::validate_namespace(utf8_of(ns));
  return ns;
}

text* key_arg(FunctionCallInfo fcinfo, int argno) {
  if (PG_ARGISNULL(argno))
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency key must not be null",
                      "Pass the key that idem_parse or idem_mint produced.");
  return key_of(PG_GETARG_TEXT_PP(argno));
}

text* key_of(const text* raw) { return text_of_utf8(core::parse_key(utf8_of(raw))); }

Jsonb* payload_arg(FunctionCallInfo fcinfo, int argno, const char* what) {
  if (PG_ARGISNULL(argno))
    throw core::Error(core::sqlstate::invalid_parameter_value,
                      std::string("idempotency ") + what + " must not be null",
                      "Pass a jsonb value; use 'null'::jsonb for a JSON null.");
  return PG_GETARG_JSONB_P(argno);
}

}  // namespace idem::pg
