// fuzz_canonical.cpp: libFuzzer target for the canonical JSON rules in
// src/core/canonical_json.hpp: JsonWriter::string and compare_keys.
//
// Input layout: byte 0 picks how many bytes JsonWriter holds before the string
// (0..127 or 8065..8192, so strings often straddle its 8 KiB block boundary);
// the rest is the text. Properties checked on every input:
//  - JsonWriter hands the sink blocks of 1..8192 bytes whose concatenation is
//    exactly what was written;
//  - the text of string() is one JSON string (RFC 8259) that an independent
//    decoder here turns back into exactly the input bytes, using only the
//    escapes PostgreSQL's escape_json() uses (\" \\ \b \f \n \r \t, and
//    \u00xx in lower-case hex for other bytes below 0x20; nothing else
//    escaped); for well-formed UTF-8 input the JSON text is well-formed UTF-8;
//  - compare_keys over the keys got by splitting the text at 0xFF bytes (a
//    byte that never occurs in UTF-8), plus an empty key with a null pointer,
//    agrees in sign with unsigned byte-wise lexicographic order, is zero only
//    for equal bytes, antisymmetric and transitive, agrees with code-point
//    order for well-formed UTF-8 keys, and sorting with it yields byte order.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/canonical_json.hpp"
#include "fuzz_support.hpp"

using idem::core::JsonWriter;
using idem::core::Slice;

namespace {

constexpr std::size_t block = 8192;  // JsonWriter's buffer size, as documented

// What the sink received: all bytes, and each block's size.
struct Received {
  std::string bytes;
  std::vector<std::size_t> blocks;
};

// JsonWriter sink that records every block.
void record(void* context, const char* data, std::size_t size) {
  auto* r = static_cast<Received*>(context);
  r->bytes.append(data, size);
  r->blocks.push_back(size);
}

// Value of one hex digit, or -1; sets *upper when it is an upper-case letter.
int hex_value(char c, bool* upper) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return *upper = true, c - 'A' + 10;
  return -1;
}

// Appends code point v as UTF-8 (v is a scalar value, at most U+10FFFF).
void append_utf8(std::string& out, std::uint32_t v) {
  if (v < 0x80) {
    out += static_cast<char>(v);
  } else if (v < 0x800) {
    out += static_cast<char>(0xC0 | (v >> 6));
    out += static_cast<char>(0x80 | (v & 0x3F));
  } else if (v < 0x10000) {
    out += static_cast<char>(0xE0 | (v >> 12));
    out += static_cast<char>(0x80 | ((v >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (v & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (v >> 18));
    out += static_cast<char>(0x80 | ((v >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((v >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (v & 0x3F));
  }
}

// Result of decoding JSON string text.
struct JsonString {
  bool valid = false;          // one complete RFC 8259 string, nothing after it
  bool pg_form = true;         // only the escapes escape_json() produces
  std::string decoded;         // the string's value, as bytes
};

// Reads four hex digits at text[i..i+3]; returns -1 if they are not hex.
long read_hex4(const std::string& text, std::size_t i, bool* upper) {
  if (text.size() - i < 4) return -1;
  long v = 0;
  for (std::size_t k = 0; k < 4; ++k) {
    const int d = hex_value(text[i + k], upper);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// An independent JSON string decoder: accepts any RFC 8259 string (all
// escapes, surrogate pairs) and notes whether it kept to escape_json()'s form.
JsonString decode_json_string(const std::string& text) {
  JsonString r;
  if (text.empty() || text[0] != '"') return r;
  std::size_t i = 1;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"') {
      r.valid = (i + 1 == text.size());
      return r;
    }
    if (c < 0x20) return r;  // a control character must be escaped
    if (c != '\\') {
      r.decoded += static_cast<char>(c);
      ++i;
      continue;
    }
    if (i + 1 >= text.size()) return r;
    const char e = text[i + 1];
    i += 2;
    switch (e) {
      case '"': r.decoded += '"'; break;
      case '\\': r.decoded += '\\'; break;
      case '/': r.decoded += '/'; r.pg_form = false; break;
      case 'b': r.decoded += '\b'; break;
      case 'f': r.decoded += '\f'; break;
      case 'n': r.decoded += '\n'; break;
      case 'r': r.decoded += '\r'; break;
      case 't': r.decoded += '\t'; break;
      case 'u': {
        bool upper = false;
        long v = read_hex4(text, i, &upper);
        if (v < 0) return r;
        i += 4;
        if (v >= 0xDC00 && v <= 0xDFFF) return r;  // lone low surrogate
        if (v >= 0xD800 && v <= 0xDBFF) {
          if (text.size() - i < 6 || text[i] != '\\' || text[i + 1] != 'u') return r;
          const long lo = read_hex4(text, i + 2, &upper);
          if (lo < 0xDC00 || lo > 0xDFFF) return r;
          i += 6;
          v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        }
        // escape_json() writes \u only for bytes below 0x20 that have no short form.
        const bool has_short = v == '\b' || v == '\f' || v == '\n' || v == '\r' || v == '\t';
        if (upper || v >= 0x20 || has_short) r.pg_form = false;
        append_utf8(r.decoded, static_cast<std::uint32_t>(v));
        break;
      }
      default:
        return r;
    }
  }
  return r;  // no closing quote
}

// Writes pad bytes then the string through a JsonWriter and checks the blocks,
// the JSON text and its decoding.
void check_string(std::size_t pad, const std::string& text) {
  Received got;
  JsonWriter w(&record, &got);
  const std::string padding(pad, 'p');
  const std::size_t half = pad / 2;
  for (std::size_t i = 0; i < half; ++i) w.put('p');
  w.put(padding.data() + half, pad - half);
  w.string(Slice{text.data(), text.size()});
  w.flush();
  w.flush();  // a second flush has nothing to hand over

  for (std::size_t n : got.blocks) FUZZ_CHECK(n >= 1 && n <= block);
  FUZZ_CHECK(got.bytes.size() >= pad);
  FUZZ_CHECK(got.bytes.compare(0, pad, padding) == 0);

  const std::string json = got.bytes.substr(pad);
  const JsonString js = decode_json_string(json);
  FUZZ_CHECK(js.valid);
  FUZZ_CHECK(js.pg_form);
  FUZZ_CHECK(js.decoded == text);
  if (idem_fuzz::decode_all(text).ok) FUZZ_CHECK(idem_fuzz::decode_all(json).ok);
}

// Sign of an int: -1, 0 or 1.
int sign(int v) { return (v > 0) - (v < 0); }

// Oracle for byte order: unsigned lexicographic comparison, shorter prefix first.
int oracle_byte_order(const std::string& a, const std::string& b) {
  const auto* pa = reinterpret_cast<const unsigned char*>(a.data());
  const auto* pb = reinterpret_cast<const unsigned char*>(b.data());
  if (std::lexicographical_compare(pa, pa + a.size(), pb, pb + b.size())) return -1;
  if (std::lexicographical_compare(pb, pb + b.size(), pa, pa + a.size())) return 1;
  return 0;
}

// A slice's bytes as a string (the null-pointer empty key included).
std::string bytes_of(Slice s) { return s.size == 0 ? std::string() : std::string(s.data, s.size); }

// Checks compare_keys over the 0xFF-separated keys of text.
void check_order(const std::string& text) {
  std::vector<std::string> keys(1);
  for (char c : text) {
    if (static_cast<unsigned char>(c) == 0xFF) {
      if (keys.size() == 12) break;  // bounds the cubic transitivity check
      keys.emplace_back();
    } else {
      keys.back() += c;
    }
  }
  keys.emplace_back();  // the empty key, passed with a null pointer below
  std::vector<Slice> slices;  // built after keys stops growing: pointers into it stay valid
  for (const auto& k : keys) slices.push_back(Slice{k.data(), k.size()});
  slices.back() = Slice{nullptr, 0};

  const std::size_t n = slices.size();
  std::vector<std::vector<int>> cmp(n, std::vector<int>(n));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) cmp[i][j] = sign(idem::core::compare_keys(slices[i], slices[j]));

  std::vector<idem_fuzz::Decoded> decoded;
  for (const auto& k : keys) decoded.push_back(idem_fuzz::decode_all(k));

  for (std::size_t i = 0; i < n; ++i) {
    const auto& di = decoded[i];
    for (std::size_t j = 0; j < n; ++j) {
      FUZZ_CHECK(cmp[i][j] == oracle_byte_order(keys[i], keys[j]));
      FUZZ_CHECK(cmp[i][j] == -cmp[j][i]);
      FUZZ_CHECK((cmp[i][j] == 0) == (keys[i] == keys[j]));
      const auto& dj = decoded[j];
      if (di.ok && dj.ok) {
        const int by_code_point = di.cps < dj.cps ? -1 : (dj.cps < di.cps ? 1 : 0);
        FUZZ_CHECK(cmp[i][j] == by_code_point);
      }
      for (std::size_t k = 0; k < n; ++k) {
        if (cmp[i][j] < 0 && cmp[j][k] < 0) FUZZ_CHECK(cmp[i][k] < 0);
        if (cmp[i][j] == 0 && cmp[j][k] == 0) FUZZ_CHECK(cmp[i][k] == 0);
      }
    }
  }

  // Sorting with it gives unsigned byte order.
  std::vector<Slice> sorted = slices;
  std::sort(sorted.begin(), sorted.end(),
            [](Slice a, Slice b) { return idem::core::compare_keys(a, b) < 0; });
  for (std::size_t i = 1; i < sorted.size(); ++i)
    FUZZ_CHECK(oracle_byte_order(bytes_of(sorted[i - 1]), bytes_of(sorted[i])) <= 0);
}

}  // namespace

// libFuzzer entry point: a padding selector byte, then the text.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t sel = data[0] >> 1;
  const std::size_t pad = (data[0] & 1) != 0 ? block - sel : sel;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  check_string(pad, text);
  check_order(text);
  return 0;
}
