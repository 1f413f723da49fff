// key.hpp: idempotency keys, minted from natural-key parts (the seed's
// IdempotencyKeyMinter) or parsed from a caller-supplied value (the seed's
// parseIdempotencyKey).
#pragma once

#include "utf8.hpp"

namespace idem::core {

inline constexpr std::size_t max_key_length = 255;  // in characters (code points)
inline constexpr std::size_t minted_key_length = 64;

// Trims Unicode white space from both ends of a UTF-8 key and checks the rest:
// not blank, at most 255 characters, no control character (below U+0020, or
// U+007F). Returns the trimmed key as a sub-slice of raw; throws Error(22023)
// whose detail names the rule that failed.
Slice parse_key(Slice raw);

// The minted key: lowercase hex SHA-256 over a 4-byte big-endian part count,
// then for each part its 4-byte big-endian UTF-8 byte length and its bytes.
// Every part must be present (a SQL NULL arrives as data == nullptr),
// non-empty and not blank; the error names the 1-based position of the first
// offending part. Writes 64 hex digits and a NUL to out.
void mint_key(const Slice* parts, std::size_t count, char out[minted_key_length + 1]);

}  // namespace idem::core
