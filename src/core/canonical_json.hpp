// canonical_json.hpp: the byte-level rules of the canonical request form
// (object keys in code-point order, strings escaped as PostgreSQL's JSON
// output escapes them), written through a fixed buffer to any sink.
//
// The walk over a value lives in the glue (it reads jsonb); everything it
// writes goes through here, so the rules are unit-tested without a server.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "utf8.hpp"

namespace idem::core {

// Orders object keys by Unicode code point. For UTF-8 that is plain byte
// order, a shorter key first when it is a prefix of the other (jsonb itself
// stores keys shortest-first, which is not this order).
int compare_keys(Slice a, Slice b) noexcept;

// Buffers canonical JSON text and hands it to sink in blocks of up to 8 KiB,
// so hashing a large value never needs the whole text in memory.
//
// Trivially destructible by design: the glue keeps it on the stack while it
// calls PostgreSQL functions that may longjmp, which must skip no destructor.
class JsonWriter {
 public:
  using Sink = void (*)(void* context, const char* data, std::size_t size);

  JsonWriter(Sink sink, void* context) noexcept : sink_(sink), context_(context) {}

  void put(char c) {
    if (used_ == sizeof buffer_) drain();
    buffer_[used_++] = c;
  }
  void put(const char* data, std::size_t size) {
    if (size == 0) return;
    if (size > sizeof buffer_ - used_) return put_across(data, size);
    std::memcpy(buffer_ + used_, data, size);
    used_ += size;
  }

  // Writes a quoted JSON string: '"' '\\' and \b \f \n \r \t as two-character
  // escapes, any other byte below 0x20 as \u00xx (lower-case hex), all else
  // verbatim, exactly as PostgreSQL's escape_json() does.
  void string(Slice s);

  // Hands whatever is buffered to the sink; call once at the end.
  void flush() { drain(); }

 private:
  void drain();
  // put() of more than the buffer has room for: filled and drained in turn.
  void put_across(const char* data, std::size_t size);

  Sink sink_;
  void* context_;
  std::size_t used_ = 0;
  char buffer_[8192];
};

static_assert(std::is_trivially_destructible_v<JsonWriter>,
              "JsonWriter must survive a PostgreSQL longjmp: see docs/internals.md");

}  // namespace idem::core
