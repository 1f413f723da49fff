// pointers.hpp: the JSON Pointers a namespace's fingerprint ignores, read
// from a text[] into a core::PointerSet block in PostgreSQL memory.
#pragma once

#include "postgres.hpp"

namespace idem::pg {

// The pointer set of pointers (a text[] of RFC 6901 pointers), palloc'd in
// the current memory context, with its size in *size; nullptr for NULL or
// an empty array (nothing ignored). Raises 22023 for a pointer that is not
// one, "" (the whole request), more than core::max_pointers or a
// multidimensional array, 22004 for a NULL element; with ns, as an error of
// that namespace's registry row (pointers written there by hand).
const void* pointer_set(ArrayType* pointers, Size* size, const text* ns = nullptr);

// Whether two pointer sets (blocks of size bytes, nullptr: none) are the same.
bool same_pointer_set(const void* a, Size a_size, const void* b, Size b_size) noexcept;

}  // namespace idem::pg
