// text.hpp: moving text between PostgreSQL (database encoding, varlena) and
// the core (UTF-8 slices), and reading the namespace argument every
// function takes.
#pragma once

#include <string>

#include "../core/utf8.hpp"
#include "postgres.hpp"

namespace idem::pg {

// The UTF-8 bytes of s (len bytes in the database encoding): s itself in a
// UTF-8 database, a palloc'd conversion otherwise. Raises PostgreSQL's own
// error for characters UTF-8 cannot hold (only possible in SQL_ASCII).
core::Slice utf8_of(const char* s, int len);

// The same for a text value.
core::Slice utf8_of(const text* t);

// Whether utf8_of(t) would succeed: false only for bytes that are not UTF-8
// in a SQL_ASCII database. Never raises.
bool convertible_to_utf8(const text* t);

// A text value in the database encoding holding the UTF-8 bytes s.
text* text_of_utf8(core::Slice s);

// The bytes of t as a std::string, for messages: call it only inside the
// expression that throws, so no std::string outlives a PostgreSQL call.
std::string string_of(const text* t);

// Whether two varlena values (text, bytea) hold the same bytes.
bool same_bytes(const struct varlena* a, const struct varlena* b) noexcept;

// Reads argument argno as a namespace and validates it; NULL is an error.
// Namespaces are ASCII, so the text is the same in every encoding.
text* namespace_arg(FunctionCallInfo fcinfo, int argno);

// Reads argument argno as a caller-supplied key: NULL is an error, and the
// key is trimmed and validated as idem_parse does. Returns the trimmed key
// in the database encoding.
text* key_arg(FunctionCallInfo fcinfo, int argno);

// The same for a key that is not an argument (an element of an array).
text* key_of(const text* raw);

// Reads argument argno as a jsonb payload; NULL is an error naming what.
Jsonb* payload_arg(FunctionCallInfo fcinfo, int argno, const char* what);

}  // namespace idem::pg
