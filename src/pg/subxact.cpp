// subxact.cpp: work in a subtransaction of its own (subxact.hpp).
#include "subxact.hpp"

extern "C" {
#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
}

namespace idem::pg {

ErrorData* in_subtransaction(void (*body)(void* arg), void* arg, void (*settle)()) {
  MemoryContext context = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  ErrorData* volatile error = nullptr;
  BeginInternalSubTransaction(nullptr);
  MemoryContextSwitchTo(context);
  PG_TRY();
  {
    body(arg);
    if (settle != nullptr) settle();
    ReleaseCurrentSubTransaction();
  }
  PG_CATCH();
  {
    if (settle != nullptr) settle();
    MemoryContextSwitchTo(context);
    error = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
  }
  PG_END_TRY();
  MemoryContextSwitchTo(context);
  CurrentResourceOwner = owner;
  return error;
}

}  // namespace idem::pg
