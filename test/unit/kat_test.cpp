// kat_test.cpp: known-answer vectors from test/kat/vectors.py (independent Python) against mint_key, Sha256
// and pointer_tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/canonical_json.hpp"
#include "core/hex.hpp"
#include "core/json_pointer.hpp"
#include "core/key.hpp"
#include "core/sha256.hpp"
#include "csv.hpp"
#include "support.hpp"

#ifndef IDEM_KAT_CSV
#error "IDEM_KAT_CSV must name test/kat/vectors.csv (the Makefile passes it)"
#endif

namespace {

const std::vector<std::string> kColumns = {"kind", "name", "input", "parts_hex", "canonical",
                                           "sha256"};

struct Vector {
  std::string kind, name, input, parts_hex, canonical, sha256;
};

// The vectors, read once; a failure to read is reported by the tests.
struct Kat {
  std::vector<std::string> header;
  std::vector<Vector> rows;
  std::string error;
};

const Kat& kat() {
  static const Kat k = [] {
    Kat k;
    try {
      auto records = csv::parse(csv::read_file(IDEM_KAT_CSV));
      if (records.empty()) throw std::runtime_error("no header row");
      k.header = records.front();
      for (std::size_t r = 1; r < records.size(); ++r) {
        const auto& f = records[r];
        if (f.size() != kColumns.size())
          throw std::runtime_error("record " + std::to_string(r) + " has " +
                                   std::to_string(f.size()) + " fields");
        k.rows.push_back({f[0], f[1], f[2], f[3], f[4], f[5]});
      }
    } catch (const std::exception& e) {
      k.error = e.what();
    }
    return k;
  }();
  return k;
}

std::vector<const Vector*> rows_of(const std::string& kind) {
  std::vector<const Vector*> out;
  for (const auto& v : kat().rows)
    if (v.kind == kind) out.push_back(&v);
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is not what vectors.py writes
}

// Decodes lowercase hex; returns false on odd length or a non-hex digit.
bool decode_hex(const std::string& hex, std::string& out) {
  if (hex.size() % 2 != 0) return false;
  out.clear();
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
  }
  return true;
}

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '.')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

bool is_lower_hex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return hex_digit(c) >= 0; });
}

std::string hex(const idem::core::Digest& d) {
  char out[65];
  idem::core::to_hex(d.data(), d.size(), out);
  return out;
}

}  // namespace

// ---- The reader itself ----------------------------------------------------------------
TEST(CsvReader, PlainAndQuotedFields) {
  const auto rows = csv::parse("a,b,c\n\"x,y\",\"say \"\"hi\"\"\",\n");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (csv::Row{"a", "b", "c"}));
  EXPECT_EQ(rows[1], (csv::Row{"x,y", "say \"hi\"", ""}));
}

TEST(CsvReader, EmbeddedNewlinesAndCrLf) {
  const auto rows = csv::parse("\"line1\nline2\r\nline3\",z\r\nlast,\"\"");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (csv::Row{"line1\nline2\r\nline3", "z"}));
  EXPECT_EQ(rows[1], (csv::Row{"last", ""}));
}

TEST(CsvReader, EmptyInputAndEmptyFields) {
  EXPECT_TRUE(csv::parse("").empty());
  EXPECT_EQ(csv::parse(",\n"), (std::vector<csv::Row>{{"", ""}}));
  EXPECT_EQ(csv::parse("\n"), (std::vector<csv::Row>{{""}}));
}

TEST(CsvReader, RejectsMalformedQuoting) {
  EXPECT_THROW(csv::parse("\"open"), std::runtime_error);
  EXPECT_THROW(csv::parse("\"a\"b,c"), std::runtime_error);
  EXPECT_THROW(csv::parse("a\"b"), std::runtime_error);
}

// ---- The vectors file -------------------------------------------------------------------
TEST(Kat, FileReadsWithTheExpectedColumns) {
  ASSERT_EQ(kat().error, "") << IDEM_KAT_CSV;
  EXPECT_EQ(kat().header, kColumns);
  std::set<std::string> names;
  for (const auto& v : kat().rows) {
    EXPECT_TRUE(v.kind == "mint" || v.kind == "canonical" || v.kind == "fingerprint")
        << v.name << ": kind " << v.kind;
    EXPECT_TRUE(names.insert(v.name).second) << "duplicate name " << v.name;
    EXPECT_TRUE(is_lower_hex64(v.sha256)) << v.name << ": sha256 " << v.sha256;
  }
}

TEST(Kat, MintVectors) {
  ASSERT_EQ(kat().error, "") << IDEM_KAT_CSV;
  const auto rows = rows_of("mint");
  EXPECT_GT(rows.size(), 20u) << "too few mint vectors in " << IDEM_KAT_CSV;
  for (const Vector* v : rows) {
    SCOPED_TRACE(v->name);
    std::vector<std::string> parts;
    for (const auto& h : split_dots(v->parts_hex)) {
      std::string bytes;
      ASSERT_TRUE(decode_hex(h, bytes)) << "bad parts_hex " << v->parts_hex;
      parts.push_back(bytes);
    }
    std::vector<idem::core::Slice> slices;
    for (const auto& p : parts) slices.push_back(idem_test::sl(p));
    char out[idem::core::minted_key_length + 1];
    idem::core::mint_key(slices.data(), slices.size(), out);
    EXPECT_EQ(std::string(out), v->sha256);
  }
}

TEST(Kat, CanonicalVectors) {
  ASSERT_EQ(kat().error, "") << IDEM_KAT_CSV;
  const auto rows = rows_of("canonical");
  EXPECT_GT(rows.size(), 20u) << "too few canonical vectors in " << IDEM_KAT_CSV;
  for (const Vector* v : rows) {
    SCOPED_TRACE(v->name);
    EXPECT_EQ(hex(idem::core::Sha256::of(v->canonical.data(), v->canonical.size())), v->sha256);
    // The same bytes streamed through JsonWriter into a hashing sink, as the glue does.
    idem::core::Sha256 h;
    idem::core::JsonWriter w(
        [](void* context, const char* data, std::size_t size) {
          static_cast<idem::core::Sha256*>(context)->update(data, size);
        },
        &h);
    w.put(v->canonical.data(), v->canonical.size());
    w.flush();
    EXPECT_EQ(hex(h.finish()), v->sha256);
  }
}

TEST(Kat, FingerprintVectors) {
  ASSERT_EQ(kat().error, "") << IDEM_KAT_CSV;
  const auto rows = rows_of("fingerprint");
  EXPECT_GE(rows.size(), 20u) << "too few fingerprint vectors in " << IDEM_KAT_CSV;
  for (const Vector* v : rows) {
    SCOPED_TRACE(v->name);
    // The canonical text with the pointed-to parts left out hashes to sha256.
    EXPECT_EQ(hex(idem::core::Sha256::of(v->canonical.data(), v->canonical.size())), v->sha256);
    // parts_hex is a non-empty list of pointers the product accepts.
    ASSERT_FALSE(v->parts_hex.empty());
    std::vector<std::string> pointers;
    for (const auto& h : split_dots(v->parts_hex)) {
      std::string bytes;
      ASSERT_TRUE(decode_hex(h, bytes)) << "bad parts_hex " << v->parts_hex;
      pointers.push_back(bytes);
    }
    EXPECT_LE(pointers.size(), idem::core::max_pointers);
    for (const auto& p : pointers) {
      SCOPED_TRACE(p);
      std::vector<std::string> tokens;
      EXPECT_NO_THROW(tokens = idem::core::pointer_tokens(idem_test::sl(p)));
      // One reference token per "/" ("~1" decodes to "/" only inside a token).
      EXPECT_EQ(tokens.size(), static_cast<std::size_t>(std::count(p.begin(), p.end(), '/')));
    }
  }
}
