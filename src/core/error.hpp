// error.hpp: the one exception type the core throws.
//
// The core knows nothing of PostgreSQL, so an error carries an SQL-standard
// SQLSTATE string and PostgreSQL-style message parts; the glue's guard
// (src/pg/guard.cpp) turns it into ereport(ERROR) at the boundary.
#pragma once

#include <exception>
#include <string>

namespace idem::core {

// SQLSTATEs the core raises (SQL standard codes, so no PostgreSQL header is needed).
namespace sqlstate {
inline constexpr const char invalid_parameter_value[] = "22023";
inline constexpr const char character_not_in_repertoire[] = "22021";
inline constexpr const char null_value_not_allowed[] = "22004";
inline constexpr const char object_not_in_prerequisite_state[] = "55000";
inline constexpr const char object_in_use[] = "55006";
inline constexpr const char insufficient_privilege[] = "42501";
inline constexpr const char undefined_object[] = "42704";
inline constexpr const char program_limit_exceeded[] = "54000";
inline constexpr const char serialization_failure[] = "40001";
inline constexpr const char read_only_sql_transaction[] = "25006";
inline constexpr const char invalid_transaction_state[] = "25000";
inline constexpr const char feature_not_supported[] = "0A000";
inline constexpr const char wrong_object_type[] = "42809";
inline constexpr const char cant_change_runtime_param[] = "55P02";
inline constexpr const char internal_error[] = "XX000";
}  // namespace sqlstate

// An error for the SQL caller: SQLSTATE, a one-line message, an optional
// detail and an optional hint.
class Error : public std::exception {
 public:
  Error(const char* sqlstate, std::string message, std::string detail = {}, std::string hint = {})
      : sqlstate_(sqlstate), message_(std::move(message)), detail_(std::move(detail)), hint_(std::move(hint)) {}

  const char* what() const noexcept override { return message_.c_str(); }
  const char* sqlstate() const noexcept { return sqlstate_; }
  const std::string& message() const noexcept { return message_; }
  const std::string& detail() const noexcept { return detail_; }
  const std::string& hint() const noexcept { return hint_; }

 private:
  const char* sqlstate_;  // always one of the static strings above
  std::string message_;
  std::string detail_;
  std::string hint_;
};

}  // namespace idem::core
