// header.cpp: the sf-string rules of the Idempotency-Key field.
#include "header.hpp"

#include <cstdio>
#include <string>

#include "error.hpp"
#include "key.hpp"

namespace idem::core {

namespace {

[[noreturn]] void invalid_header(const std::string& detail) {
  throw Error(sqlstate::invalid_parameter_value, "invalid idempotency key",
              "The Idempotency-Key field is not a Structured Field String: " + detail);
}

bool is_ows(char c) noexcept { return c == ' ' || c == '\t'; }

// "at byte N." for the 0-based offset i.
std::string position(std::size_t i) { return "at byte " + std::to_string(i + 1) + "."; }

// A bare value (Stripe-style) is a key by the key rules, but not a list
// (a proxy joins a repeated field as "k, k": a new key would answer fresh)
// and not a value holding a double quote that does not start it.
Slice bare_key(Slice header) {
  for (std::size_t i = 0; i < header.size; ++i) {
    if (header.data[i] == ',')
      throw Error(sqlstate::invalid_parameter_value, "invalid idempotency key",
                  "A bare Idempotency-Key value (one not in double quotes) cannot hold a comma: it holds more than "
                  "one value (a list, as when duplicate fields are joined), " +
                      position(i));
    if (header.data[i] == '"')
      throw Error(sqlstate::invalid_parameter_value, "invalid idempotency key",
                  "A bare Idempotency-Key value (one not in double quotes) cannot hold a double quote, at byte " +
                      std::to_string(i + 1) + "; a quoted key starts with one.");
  }
  return parse_key(header);
}

}  // namespace

Slice header_key(Slice header, char* buffer) {
  std::size_t i = 0;
  while (i < header.size && is_ows(header.data[i])) ++i;
  if (i == header.size || header.data[i] != '"') return bare_key(header);

  std::size_t out = 0;
  for (++i;; ++i) {
    if (i == header.size) invalid_header("the closing double quote is missing.");
    const unsigned char c = static_cast<unsigned char>(header.data[i]);
    if (c == '"') break;
    if (c == '\\') {
      if (i + 1 == header.size || (header.data[i + 1] != '"' && header.data[i + 1] != '\\'))
        invalid_header("only \\\" and \\\\ are escapes; the backslash " + position(i));
      buffer[out++] = header.data[++i];
      continue;
    }
    if (c < 0x20 || c > 0x7E) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", c);
      invalid_header("a string holds only printable ASCII (0x20 to 0x7E), not byte " + std::string(byte) + " " +
                     position(i));
    }
    buffer[out++] = static_cast<char>(c);
  }
  std::size_t rest = i + 1;
  while (rest < header.size && is_ows(header.data[rest])) ++rest;
  if (rest < header.size) {
    const char c = header.data[rest];
    if (c == ',')
      invalid_header("it holds more than one value (a list, as when duplicate fields are joined), " + position(rest));
    if (c == ';') invalid_header("parameters are not defined for Idempotency-Key, " + position(rest));
    invalid_header("something follows the closing double quote, " + position(rest));
  }
  return parse_key(Slice{buffer, out});
}

}  // namespace idem::core
