// canonical_json.cpp: key order, string escaping and buffering for canonical JSON.
#include "canonical_json.hpp"

#include <algorithm>
#include <cstring>

namespace idem::core {

int compare_keys(Slice a, Slice b) noexcept {
  const std::size_t common = std::min(a.size, b.size);
  const int c = common == 0 ? 0 : std::memcmp(a.data, b.data, common);
  if (c != 0) return c;
  return a.size < b.size ? -1 : (a.size > b.size ? 1 : 0);
}

void JsonWriter::drain() {
  if (used_ != 0) sink_(context_, buffer_, used_);
  used_ = 0;
}

void JsonWriter::put_across(const char* data, std::size_t size) {
  while (size != 0) {
    if (used_ == sizeof buffer_) drain();
    const std::size_t n = std::min(size, sizeof buffer_ - used_);
    std::memcpy(buffer_ + used_, data, n);
    used_ += n, data += n, size -= n;
  }
}

namespace {

// Whether byte c is written escaped: '"', '\\' and every byte below 0x20.
// A table, so that the loop over a string's bytes does one load per byte.
struct EscapedBytes {
  bool escaped[256];
  constexpr EscapedBytes() : escaped() {
    for (int c = 0; c < 0x20; ++c) escaped[c] = true;
    escaped[static_cast<unsigned char>('"')] = escaped[static_cast<unsigned char>('\\')] = true;
  }
};
constexpr EscapedBytes escaped_bytes;

// The escape for byte c, one that escaped_bytes marks.
const char* escape_for(unsigned char c, char scratch[7]) noexcept {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default:
      static constexpr char hex[] = "0123456789abcdef";
      scratch[0] = '\\', scratch[1] = 'u', scratch[2] = '0', scratch[3] = '0';
      scratch[4] = hex[c >> 4], scratch[5] = hex[c & 0x0F], scratch[6] = '\0';
      return scratch;
  }
}

}  // namespace

void JsonWriter::string(Slice s) {
  put('"');
  const char* run = s.data;  // start of the pending run of verbatim bytes
  const char* const end = s.data + s.size;
  char scratch[7];
  for (const char* p = s.data; p != end; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (!escaped_bytes.escaped[c]) continue;
    put(run, static_cast<std::size_t>(p - run));
    const char* esc = escape_for(c, scratch);
    put(esc, std::strlen(esc));
    run = p + 1;
  }
  put(run, static_cast<std::size_t>(end - run));
  put('"');
}

}  // namespace idem::core
