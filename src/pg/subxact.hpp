// subxact.hpp: running a piece of work in a subtransaction of its own, so
// that an error it raises undoes only its work and is handed back to the
// caller to judge (rethrown, or reported and skipped).
#pragma once

#include "postgres.hpp"

extern "C" {
#include "utils/elog.h"
}

namespace idem::pg {

// Runs body(arg) in a subtransaction. Returns nullptr when it finished
// (its work kept), else the error it raised, copied into the caller's
// memory context with the subtransaction rolled back; the caller rethrows
// it (ReThrowError) or frees it (FreeErrorData). settle, when given, runs
// as soon as body has ended either way, before the subtransaction does (a
// timer to stop). body must hold no live C++ object across a PostgreSQL
// call that can fail (guard_callback wraps one that throws).
ErrorData* in_subtransaction(void (*body)(void* arg), void* arg, void (*settle)() = nullptr);

}  // namespace idem::pg
