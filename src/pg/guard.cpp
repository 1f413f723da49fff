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
  char hint[512];
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
                  errmsg("%s", e.message),
                  e.detail[0] != '\0' ? errdetail("%s", e.detail) : 0,
                  e.hint[0] != '\0' ? errhint("%s", e.hint) : 0));
  pg_unreachable();
}

// Runs f; whatever C++ exception leaves it is captured into e. Returns
// whether one did.
template <class F>
bool captured(F&& f, CapturedError& e) {
  try {
    f();
    return false;
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
  return true;
}

}  // namespace

Datum guard(Body body, FunctionCallInfo fcinfo) {
  CapturedError e;
  Datum result = 0;
  // The exception object is destroyed when captured returns: raising then
  // skips nothing.
  if (captured([&] { result = body(fcinfo); }, e)) raise(e);
  return result;
}

void guard_callback(void (*body)(void* arg), void* arg) {
  CapturedError e;
  if (captured([&] { body(arg); }, e)) raise(e);
}

}  // namespace idem::pg
