// namespace.cpp: validation of consumer namespaces.
#include "namespace.hpp"

#include <string>

#include "error.hpp"

namespace idem::core {

namespace {

bool allowed(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

[[noreturn]] void invalid(std::string detail) {
  throw Error(sqlstate::invalid_parameter_value, "invalid idempotency namespace", std::move(detail));
}

}  // namespace

void validate_namespace(Slice ns) {
  if (ns.size == 0) invalid("The namespace is empty; it must be 1 to 64 characters.");
  // Every allowed character is one byte, so the first disallowed byte is where
  // the first disallowed character starts, and byte length equals character
  // length whenever the alphabet check passes.
  std::size_t pos = 0;  // characters before byte i
  for (std::size_t i = 0; i < ns.size; ++pos) {
    if (allowed(ns.data[i])) {
      ++i;
      continue;
    }
    const char32_t c = next_code_point(ns.data, ns.size, i);
    std::string what;
    if (c > 0x20 && c < 0x7F && c != '"') {
      what = std::string("\"") + static_cast<char>(c) + "\"";
    } else {
      char cp[12];
      format_code_point(c, cp);
      what = cp;
    }
    invalid("Character " + what + " at position " + std::to_string(pos + 1) +
            " is not allowed; use only lower-case a-z, digits 0-9, \"-\" and \"_\".");
  }
  if (ns.size > max_namespace_length)
    invalid("The namespace is " + std::to_string(ns.size) + " characters long; the limit is 64.");
}

}  // namespace idem::core
