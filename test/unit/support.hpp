// support.hpp: shared test helpers: Slice from std::string, and catching idem::core::Error.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "core/utf8.hpp"

namespace idem_test {

// A Slice over s's bytes (embedded NULs included); s must outlive it.
inline idem::core::Slice sl(const std::string& s) { return {s.data(), s.size()}; }
// A Slice over a string literal (static storage, so no temporary to outlive).
inline idem::core::Slice sl(const char* s) { return {s, std::strlen(s)}; }

// Runs f, expects it to throw idem::core::Error and returns the error for
// inspection. Any other exception escapes and fails the test; no exception at
// all is a failure reported at the caller's line, and an empty Error (whose
// fields match nothing a test expects) is returned.
template <class F>
idem::core::Error expect_core_error(F&& f, const char* file, int line) {
  try {
    std::forward<F>(f)();
  } catch (const idem::core::Error& e) {
    return e;
  }
  ADD_FAILURE_AT(file, line) << "expected idem::core::Error, but nothing was thrown";
  return idem::core::Error("", "", "");
}

}  // namespace idem_test

// EXPECT_CORE_ERROR(statement) evaluates to the idem::core::Error it threw.
#define EXPECT_CORE_ERROR(...) \
  ::idem_test::expect_core_error([&] { __VA_ARGS__; }, __FILE__, __LINE__)
