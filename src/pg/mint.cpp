// mint.cpp: idem_mint(namespace, parts), a deterministic key from natural-key parts.
#include "../core/error.hpp"
#include "../core/key.hpp"
#include "guard.hpp"
#include "text.hpp"

using namespace idem;

// Reads the text[] into UTF-8 slices (NULL elements as null slices) and lets
// the core check and hash them, so the hash is the same in every database
// encoding.
IDEM_FUNCTION(idem_mint) {
  pg::namespace_arg(fcinfo, 0);
  if (PG_ARGISNULL(1))
    throw core::Error(core::sqlstate::invalid_parameter_value, "idempotency key parts must not be null",
                      "Pass a text[] with at least one non-blank part.");
  ArrayType* array = PG_GETARG_ARRAYTYPE_P(1);
  if (ARR_NDIM(array) > 1)
    throw core::Error(core::sqlstate::invalid_parameter_value,
                      "idempotency key parts must be a one-dimensional array",
                      "The array has " + std::to_string(ARR_NDIM(array)) + " dimensions.");

  Datum* elems;
  bool* nulls;
  int count;
  deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &count);
  auto* parts = static_cast<core::Slice*>(palloc(sizeof(core::Slice) * (count > 0 ? count : 1)));
  for (int i = 0; i < count; ++i)
    parts[i] = nulls[i] ? core::Slice{nullptr, 0} : pg::utf8_of(DatumGetTextPP(elems[i]));

  char key[core::minted_key_length + 1];
  core::mint_key(parts, static_cast<std::size_t>(count), key);
  PG_RETURN_TEXT_P(cstring_to_text_with_len(key, core::minted_key_length));
}
