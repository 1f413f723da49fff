// guard.cpp: exception-to-ereport translation for every entry point.
#include "guard.hpp"

#include <cstdio>
#include <cstring>
#include <new>

#include "../core/error.hpp"

namespace idem::pg {

namespace {

// What an exception said, in storage that needs no destructor, so ereport's
// longjmp may leave it behind.
struct CapturedError {
  char sqlstate[6];
  char message[1024];
  char detail[1024];
  char hint[256];
};

void capture(CapturedError& out, const char* sqlstate, const char* message, const char* detail,
             const char* hint = "") noexcept {
  std::snprintf(out.sqlstate, sizeof out.sqlstate, "%s", sqlstate);
  std::snprintf(out.message, sizeof out.message, "%s", message);
  std::snprintf(out.detail, sizeof out.detail, "%s", detail);
  std::snprintf(out.hint, sizeof out.hint, "%s", hint);
}

[[noreturn]] void raise(const CapturedError& e) {
  const char* s = e.sqlstate;
  ereport(ERROR, (errcode(MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4])),
                  errmsg_internal("%s", e.message),
                  e.detail[0] != '\0' ? errdetail_internal("%s", e.detail) : 0,
                  e.hint[0] != '\0' ? errhint("%s", e.hint) : 0));
  pg_unreachable();
}

}  // namespace

Datum guard(Body body, FunctionCallInfo fcinfo) {
  CapturedError e;
  try {
    return body(fcinfo);
  } catch (const core::Error& err) {
    capture(e, err.sqlstate(), err.message().c_str(), err.detail().c_str(), err.hint().c_str());
  } catch (const std::bad_alloc&) {
    capture(e, "53200", "out of memory", "A C++ allocation in the idempotency extension failed.");
  } catch (const std::exception& err) {
    capture(e, "XX000", "internal error in the idempotency extension", err.what());
  } catch (...) {
    capture(e, "XX000", "internal error in the idempotency extension",
            "An unknown C++ exception was caught.");
  }
  // The exception object is destroyed by now: raising here skips nothing.
  raise(e);
}

}  // namespace idem::pg
