// canonical.hpp: the canonical form of a jsonb value and its SHA-256, the
// request fingerprint that idem_begin compares.
#pragma once

#include "../core/sha256.hpp"
#include "postgres.hpp"

namespace idem::pg {

// SHA-256 of the canonical UTF-8 text of the value in container, streamed
// while walking the jsonb; the text is never held whole. ignore: the
// pointer set (pointers.hpp) of the members and elements left out of it,
// nullptr for none.
core::Digest request_hash(JsonbContainer* container, const void* ignore = nullptr);

// The same fingerprint as a 32-byte bytea, as SQL sees it.
bytea* request_hash_bytea(JsonbContainer* container, const void* ignore = nullptr);

// The canonical text itself, in the database encoding.
text* canonical_text(JsonbContainer* container, const void* ignore = nullptr);

// Raises 22021, as a request's fingerprint does, when a string of the value
// is not valid UTF-8: possible only in a SQL_ASCII database, which checks
// no text on input, so results and errors are refused there as requests are.
// Does nothing in any other database.
void check_utf8(JsonbContainer* container);

}  // namespace idem::pg
