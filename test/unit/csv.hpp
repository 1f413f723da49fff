// csv.hpp: a minimal RFC 4180 CSV reader (quoted fields, doubled quotes, embedded commas and newlines).
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace csv {

using Row = std::vector<std::string>;

// Splits text into records of fields. Records end at LF or CRLF outside quotes;
// a final line terminator is optional. Throws std::runtime_error on a quote
// inside an unquoted field, text after a closing quote, or an unclosed quote.
inline std::vector<Row> parse(std::string_view text) {
  std::vector<Row> rows;
  Row row;
  std::size_t i = 0;
  const std::size_t n = text.size();
  if (n == 0) return rows;
  for (;;) {
    std::string field;
    if (i < n && text[i] == '"') {
      for (++i;; ++i) {
        if (i == n) throw std::runtime_error("csv: unterminated quoted field");
        if (text[i] != '"') {
          field += text[i];
        } else if (i + 1 < n && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          ++i;
          break;
        }
      }
      if (i < n && text[i] != ',' && text[i] != '\n' && text[i] != '\r')
        throw std::runtime_error("csv: text after a closing quote");
    } else {
      for (; i < n && text[i] != ',' && text[i] != '\n' && text[i] != '\r'; ++i) {
        if (text[i] == '"') throw std::runtime_error("csv: quote inside an unquoted field");
        field += text[i];
      }
    }
    row.push_back(std::move(field));
    if (i == n) break;
    if (text[i] == ',') {
      ++i;
      continue;
    }
    if (text[i] == '\r') {
      if (i + 1 == n || text[i + 1] != '\n') throw std::runtime_error("csv: bare CR");
      ++i;
    }
    ++i;  // the LF
    rows.push_back(std::move(row));
    row.clear();
    if (i == n) return rows;
  }
  rows.push_back(std::move(row));
  return rows;
}

// Reads a whole file as bytes; throws std::runtime_error if it cannot be opened.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace csv
