// keys_kat_test.cpp: the key vectors of test/kat/keys.csv (independent
// Python, rules 4 to 6 of test/kat/vectors.py) against validate_namespace,
// parse_key and mint_key: the answers and the errors' messages and details
// that every client package also tests against.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/key.hpp"
#include "core/namespace.hpp"
#include "csv.hpp"
#include "support.hpp"

#ifndef IDEM_KEYS_CSV
#error "IDEM_KEYS_CSV must name test/kat/keys.csv (the Makefile passes it)"
#endif

namespace {

struct KeyVector {
  std::string function, name, input, key, message, detail;
};

// A JSON value of the vectors: a string (with \uXXXX escapes, surrogate
// pairs joined), null, or an array of those. Enough for the CSV's inputs.
struct Json {
  bool null = false;
  std::string text;
  std::vector<Json> items;
};

void put_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

Json parse_json(const std::string& s, std::size_t& i) {
  while (s[i] == ' ') ++i;
  Json v;
  if (s.compare(i, 4, "null") == 0) {
    i += 4;
    v.null = true;
    return v;
  }
  if (s[i] == '[') {
    ++i;
    while (s[i] == ' ') ++i;
    while (s[i] != ']') {
      v.items.push_back(parse_json(s, i));
      while (s[i] == ' ' || s[i] == ',') ++i;
    }
    ++i;
    return v;
  }
  EXPECT_EQ(s[i], '"') << s;
  for (++i; s[i] != '"'; ++i) {
    if (s[i] != '\\') {
      v.text += s[i];
      continue;
    }
    const char e = s[++i];
    if (e == 'u') {
      char32_t c = static_cast<char32_t>(std::stoul(s.substr(i + 1, 4), nullptr, 16));
      i += 4;
      if (c >= 0xD800 && c < 0xDC00) {  // a surrogate pair
        const char32_t low = static_cast<char32_t>(std::stoul(s.substr(i + 3, 4), nullptr, 16));
        c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
        i += 6;
      }
      put_utf8(v.text, c);
    } else {
      const std::string from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
      v.text += to[from.find(e)];
    }
  }
  ++i;
  return v;
}

Json json(const std::string& s) {
  std::size_t i = 0;
  return parse_json(s, i);
}

std::vector<KeyVector> vectors() {
  std::vector<KeyVector> rows;
  const auto records = csv::parse(csv::read_file(IDEM_KEYS_CSV));
  for (std::size_t r = 1; r < records.size(); ++r) {
    const auto& f = records[r];
    rows.push_back({f.at(0), f.at(1), f.at(2), f.at(3), f.at(4), f.at(5)});
  }
  return rows;
}

// Runs one vector's function; the error, if any, into message and detail.
std::string run(const KeyVector& v, std::string& message, std::string& detail) {
  const Json in = json(v.input);
  try {
    if (v.function == "namespace") {
      idem::core::validate_namespace(idem_test::sl(in.text));
      return "ok";
    }
    if (v.function == "parse") {
      if (in.null) return "null";
      const idem::core::Slice key = idem::core::parse_key(idem_test::sl(in.text));
      return "\"" + std::string(key.data, key.size) + "\"";
    }
    std::vector<idem::core::Slice> parts;
    for (const Json& p : in.items) parts.push_back(p.null ? idem::core::Slice{nullptr, 0} : idem_test::sl(p.text));
    char out[idem::core::minted_key_length + 1];
    idem::core::mint_key(parts.data(), parts.size(), out);
    return "\"" + std::string(out) + "\"";
  } catch (const idem::core::Error& e) {
    EXPECT_STREQ(e.sqlstate(), "22023") << v.name;
    message = e.message(), detail = e.detail();
    return "";
  }
}

// The key as the vector states it, its JSON escapes decoded, quoted.
std::string expected_key(const KeyVector& v) {
  if (v.key.empty() || v.key == "ok" || v.key == "null") return v.key;
  return "\"" + json(v.key).text + "\"";
}

TEST(KeysKat, EveryVectorAnswersAsTheSpecificationSays) {
  const auto rows = vectors();
  ASSERT_GE(rows.size(), 30u);
  for (const KeyVector& v : rows) {
    std::string message, detail;
    const std::string key = run(v, message, detail);
    EXPECT_EQ(key, expected_key(v)) << v.name;
    EXPECT_EQ(message, v.message) << v.name;
    EXPECT_EQ(detail, v.detail) << v.name;
  }
}

}  // namespace
