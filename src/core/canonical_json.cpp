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

void JsonWriter::put(const char* data, std::size_t size) {
  while (size != 0) {
    if (used_ == sizeof buffer_) drain();
    const std::size_t n = std::min(size, sizeof buffer_ - used_);
    std::memcpy(buffer_ + used_, data, n);
    used_ += n, data += n, size -= n;
  }
}

namespace {

// The escape for byte c, or nullptr when c is written as it is.
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
      if (c >= 0x20) return nullptr;
      static constexpr char hex[] = "0123456789abcdef";
      scratch[0] = '\\', scratch[1] = 'u', scratch[2] = '0', scratch[3] = '0';
      scratch[4] = hex[c >> 4], scratch[5] = hex[c & 0x0F], scratch[6] = '\0';
      return scratch;
  }
}

}  // namespace

void JsonWriter::string(Slice s) {
  put('"');
  std::size_t run = 0;  // start of the pending run of verbatim bytes
  char scratch[7];
  for (std::size_t i = 0; i < s.size; ++i) {
    const char* esc = escape_for(static_cast<unsigned char>(s.data[i]), scratch);
    if (esc == nullptr) continue;
    put(s.data + run, i - run);
    put(esc, std::strlen(esc));
    run = i + 1;
  }
  put(s.data + run, s.size - run);
  put('"');
}

}  // namespace idem::core
