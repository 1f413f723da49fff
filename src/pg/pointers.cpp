// pointers.cpp: a text[] of JSON Pointers as the core's pointer set.
#include "pointers.hpp"

#include <cstring>

#include "../core/error.hpp"
#include "../core/json_pointer.hpp"
#include "text.hpp"

namespace idem::pg {

const void* pointer_set(ArrayType* pointers, Size* size) {
  *size = 0;
  if (pointers == nullptr) return nullptr;
  if (ARR_NDIM(pointers) > 1)
    throw core::Error(core::sqlstate::invalid_parameter_value, "JSON Pointers must be a one-dimensional array",
                      "It has " + std::to_string(ARR_NDIM(pointers)) + " dimensions.");
  Datum* values;
  bool* nulls;
  int n = 0;
  deconstruct_array(pointers, TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, &n);
  if (n == 0) return nullptr;
  auto* slices = static_cast<core::Slice*>(palloc(sizeof(core::Slice) * n));
  for (int i = 0; i < n; ++i) {
    if (nulls[i])
      throw core::Error(core::sqlstate::null_value_not_allowed, "JSON Pointer must not be null",
                        "Element " + std::to_string(i + 1) + " of the pointers is NULL.");
    slices[i] = utf8_of(DatumGetTextPP(values[i]));  // may convert: before any C++ object lives
  }
  const std::size_t bound = core::PointerSet::bound(slices, n);
  void* block = palloc(bound);  // MAXALIGN'd, enough for the nodes
  *size = core::PointerSet::build(slices, n, block);
  return block;
}

bool same_pointer_set(const void* a, Size a_size, const void* b, Size b_size) noexcept {
  if (a == nullptr || b == nullptr) return a == b;
  return a_size == b_size && std::memcmp(a, b, a_size) == 0;
}

}  // namespace idem::pg
