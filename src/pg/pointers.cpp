// pointers.cpp: a text[] of JSON Pointers as the core's pointer set.
#include "pointers.hpp"

#include <cstring>

#include "../core/error.hpp"
#include "../core/json_pointer.hpp"
#include "text.hpp"

namespace idem::pg {

namespace {

// Raises e, about element i (from 0; -1: the whole list), as an error of
// the namespace's registry row when ns is given.
[[noreturn]] void refuse(const core::Error& e, int i, const text* ns) {
  std::string detail = e.detail();
  if (i >= 0) {
    if (!detail.empty() && detail[0] >= 'A' && detail[0] <= 'Z') detail[0] = static_cast<char>(detail[0] - 'A' + 'a');
    detail = "Element " + std::to_string(i + 1) + " of the pointers: " + detail;
  }
  if (ns == nullptr) throw core::Error(e.sqlstate(), e.message(), std::move(detail), e.hint());
  throw core::Error(e.sqlstate(),
                    "idempotency namespace \"" + string_of(ns) + "\" has an invalid fingerprint_ignore: " +
                        e.message(),
                    std::move(detail),
                    "Someone wrote it into idem_namespace_config by hand. Write back the value it had: the "
                    "namespace's records were fingerprinted under it (without records, idem_namespace_fingerprint "
                    "sets any).");
}

}  // namespace

const void* pointer_set(ArrayType* pointers, Size* size, const text* ns) {
  *size = 0;
  if (pointers == nullptr) return nullptr;
  if (ARR_NDIM(pointers) > 1)
    refuse(core::Error(core::sqlstate::invalid_parameter_value, "JSON Pointers must be a one-dimensional array",
                       "It has " + std::to_string(ARR_NDIM(pointers)) + " dimensions."),
           -1, ns);
  Datum* values;
  bool* nulls;
  int n = 0;
  deconstruct_array(pointers, TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, &n);
  if (n == 0) return nullptr;
  auto* slices = static_cast<core::Slice*>(palloc(sizeof(core::Slice) * n));
  for (int i = 0; i < n; ++i) {
    if (nulls[i])
      refuse(core::Error(core::sqlstate::null_value_not_allowed, "JSON Pointer must not be null",
                         "Element " + std::to_string(i + 1) + " of the pointers is NULL."),
             -1, ns);
    slices[i] = utf8_of(DatumGetTextPP(values[i]));  // may convert: before any C++ object lives
  }
  // Only core code in the tries: it allocates nothing of PostgreSQL's.
  for (int i = 0; i < n; ++i) {
    try {
      (void)core::pointer_tokens(slices[i]);
    } catch (const core::Error& e) {
      refuse(e, i, ns);
    }
  }
  std::size_t bound = 0;
  try {
    bound = core::PointerSet::bound(slices, n);
  } catch (const core::Error& e) {
    refuse(e, -1, ns);
  }
  void* block = palloc(bound);  // MAXALIGN'd, enough for the nodes
  *size = core::PointerSet::build(slices, n, block);  // checked above: does not throw
  return block;
}

bool same_pointer_set(const void* a, Size a_size, const void* b, Size b_size) noexcept {
  if (a == nullptr || b == nullptr) return a == b;
  return a_size == b_size && std::memcmp(a, b, a_size) == 0;
}

}  // namespace idem::pg
