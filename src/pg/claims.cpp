// claims.cpp: which keys the current transaction still holds in progress,
// checked when it commits or prepares.
//
// A hash table (in TopTransactionContext) maps each claimed (namespace,
// stored key) to whether it is open, and a log records every change with the
// subtransaction that made it. Subtransaction ids grow within a transaction,
// and a subtransaction that aborts is the innermost one, so the changes it
// undoes are exactly the log's entries from the end back to the first one
// made with its id or a later one: they are popped and reversed. Every step
// is O(1) per change; nothing is read from the table at COMMIT.
#include "claims.hpp"

#include <cstdio>
#include <cstring>

extern "C" {
#include "access/xact.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

#include "../core/error.hpp"
#include "guard.hpp"
#include "policy.hpp"
#include "text.hpp"

namespace idem::pg {

namespace {

// The hash key: pointers to the namespace and stored key, hashed and
// compared by content. The table holds copies in TopTransactionContext.
struct ClaimId {
  const text* ns;
  const text* key;
};

struct Claim {
  ClaimId id;  // first: dynahash keys lead the entry
  bool open;
  bool hashed;
  bool in_block;  // made inside a transaction block (not autocommit)
  bool held;      // held by the key's lock alone: no row (data says what to write)
  HeldClaim data;
};

struct Change {
  SubTransactionId subxact;
  Claim* claim;
  bool opened;  // the change opened the claim (a fresh begin) or closed it (a finish)
  // What an opening change replaced (a claim is opened again after it was
  // finished, maybe as the other kind): put back when it is undone.
  bool was_held;
  HeldClaim was;
};

HTAB* claims = nullptr;  // NULL: nothing claimed in this transaction
Change* changes = nullptr;
int change_count = 0;
int change_capacity = 0;
long open_count = 0;
long held_count = 0;

uint32 claim_hash(const void* k, Size) noexcept {
  const auto* id = static_cast<const ClaimId*>(k);
  const uint32 h = hash_bytes(reinterpret_cast<const unsigned char*>(VARDATA_ANY(id->ns)), VARSIZE_ANY_EXHDR(id->ns));
  return hash_combine(h, hash_bytes(reinterpret_cast<const unsigned char*>(VARDATA_ANY(id->key)),
                                    VARSIZE_ANY_EXHDR(id->key)));
}

int claim_match(const void* a, const void* b, Size) noexcept {
  const auto* x = static_cast<const ClaimId*>(a);
  const auto* y = static_cast<const ClaimId*>(b);
  return same_bytes(x->ns, y->ns) && same_bytes(x->key, y->key) ? 0 : 1;
}

text* copy_text(const text* t) {
  const Size len = VARSIZE_ANY_EXHDR(t);
  auto* out = static_cast<text*>(MemoryContextAlloc(TopTransactionContext, VARHDRSZ + len));
  SET_VARSIZE(out, VARHDRSZ + len);
  std::memcpy(VARDATA(out), VARDATA_ANY(t), len);
  return out;
}

void log_change(Claim* claim, bool opened) {
  if (change_count == change_capacity) {
    const int capacity = change_capacity == 0 ? 16 : change_capacity * 2;
    const Size size = sizeof(Change) * static_cast<Size>(capacity);
    changes = static_cast<Change*>(changes == nullptr ? MemoryContextAlloc(TopTransactionContext, size)
                                                      : repalloc_huge(changes, size));
    change_capacity = capacity;
  }
  changes[change_count++] = Change{GetCurrentSubTransactionId(), claim, opened, claim->held, claim->data};
  claim->open = opened;
  open_count += opened ? 1 : -1;
}

// Forgets everything: TopTransactionContext, which held it, is going away.
void reset() {
  claims = nullptr;
  changes = nullptr;
  change_count = change_capacity = 0;
  open_count = 0;
  held_count = 0;
}

// Closes the WITH HOLD cursors declared in this transaction. COMMIT runs
// such a cursor to its end and keeps its rows before the transaction
// callbacks run, and then no longer counts it as the transaction's: refused
// here, the transaction is rolled back but the cursor would survive, with
// rows that report claims that were rolled back (fresh, and a fence). An
// abort before that point closes them, and this does the same.
// Returns how many it closed.
int close_holdable_cursors() {
  // COMMIT has popped the statements' snapshots by now: the query needs one.
  PushActiveSnapshot(GetTransactionSnapshot());
  if (SPI_connect() != SPI_OK_CONNECT) {
    PopActiveSnapshot();
    return 0;
  }
  int closed = 0;
  const Datum values[1] = {TimestampTzGetDatum(GetCurrentTransactionStartTimestamp())};
  Oid types[1] = {TIMESTAMPTZOID};
  const int rc = SPI_execute_with_args(
      "SELECT c.name FROM pg_catalog.pg_cursors c WHERE c.is_holdable"
      " AND c.creation_time OPERATOR(pg_catalog.>=) $1",
      1, types, const_cast<Datum*>(values), nullptr, true, 0);
  for (uint64 i = 0; rc == SPI_OK_SELECT && i < SPI_processed; ++i) {
    const char* name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
    Portal portal = name == nullptr ? nullptr : GetPortalByName(name);
    if (portal != nullptr && (portal->cursorOptions & CURSOR_OPT_HOLD) != 0 && portal->status != PORTAL_ACTIVE) {
      PortalDrop(portal, false);
      ++closed;
    }
  }
  SPI_finish();
  PopActiveSnapshot();
  return closed;
}

// The message for the first open claim found.
void refuse_commit(bool preparing) {
  HASH_SEQ_STATUS seq;
  hash_seq_init(&seq, claims);
  Claim* open = nullptr;
  while (Claim* c = static_cast<Claim*>(hash_seq_search(&seq))) {
    if (!c->open) continue;
    open = c;
    hash_seq_term(&seq);
    break;
  }
  if (open == nullptr) return;  // cannot happen while open_count > 0
  const int closed = close_holdable_cursors();
  char label[32];
  if (open->hashed)  // the stored key is the hex SHA-256 that labels start with
    std::snprintf(label, sizeof label, "sha256:%.12s...", VARDATA_ANY(open->id.key));
  else
    key_label(open->id.key, label);
  const char* verb = preparing ? "prepare" : "commit";
  char others[64] = "";
  if (open_count > 1) std::snprintf(others, sizeof others, " (and %ld more)", open_count - 1);
  throw core::Error(
      core::sqlstate::invalid_transaction_state,
      std::string("cannot ") + verb + " while idempotency key " + label + " is in progress" + others,
      std::string(open->in_block ? "This transaction's idem_begin answered fresh for the key in namespace \""
                                 : "idem_begin answered fresh for the key in namespace \"") +
          string_of(open->id.ns) +
          (open->in_block ? "\", and no idem_commit, idem_fail_permanent or idem_fail_transient ended the attempt"
                          : "\" outside a transaction block (autocommit), so its own statement would have "
                            "committed the record with no work done") +
          ": every retry would answer in_flight. The transaction was rolled back" +
          (closed > 0 ? std::string(", and the WITH HOLD cursors it declared were closed (their rows came from it).")
                      : std::string(".")),
      "Finish every fresh attempt before COMMIT with idem_commit, idem_fail_permanent or idem_fail_transient; in "
      "autocommit mode, put begin, work and finish in one BEGIN ... COMMIT block or one function. An operation "
      "that spans transactions needs an in_progress_lease on its namespace.");
}

void check_at_commit(void* arg) {
  if (open_count > 0) refuse_commit(arg != nullptr);
}

void on_xact(XactEvent event, void*) {
  switch (event) {
    case XACT_EVENT_PRE_COMMIT:
    case XACT_EVENT_PARALLEL_PRE_COMMIT:
      if (claims != nullptr) guard_callback(check_at_commit, nullptr);
      break;
    case XACT_EVENT_PRE_PREPARE:
      if (claims != nullptr) guard_callback(check_at_commit, &claims);
      break;
    default:  // COMMIT, ABORT, PREPARE (and their parallel forms): the transaction is over
      reset();
      break;
  }
}

// Reverses the changes of an aborting subtransaction (and of its committed
// children, whose ids are larger).
void on_subxact(SubXactEvent event, SubTransactionId subxact, SubTransactionId, void*) {
  if (event != SUBXACT_EVENT_ABORT_SUB) return;
  while (change_count > 0 && changes[change_count - 1].subxact >= subxact) {
    const Change& c = changes[--change_count];
    c.claim->open = !c.opened;
    // The key's lock went with the subtransaction's resource owner.
    held_count += (c.was_held ? 1 : 0) - (c.claim->held ? 1 : 0);
    c.claim->held = c.was_held;
    c.claim->data = c.was;
    open_count += c.opened ? -1 : 1;
  }
}

// The entry of (ns, key), made (with copies of both) if there is none.
Claim* entry(const text* ns, const text* key) {
  if (claims == nullptr) {
    HASHCTL ctl;
    std::memset(&ctl, 0, sizeof ctl);
    ctl.keysize = sizeof(ClaimId);
    ctl.entrysize = sizeof(Claim);
    ctl.hash = claim_hash;
    ctl.match = claim_match;
    ctl.hcxt = TopTransactionContext;
    claims = hash_create("idempotency claims", 64, &ctl, HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
  }
  ClaimId id{ns, key};
  auto* c = static_cast<Claim*>(hash_search(claims, &id, HASH_FIND, nullptr));
  if (c == nullptr) {
    // Copied first: an entry must never point at memory that goes away.
    id = ClaimId{copy_text(ns), copy_text(key)};
    c = static_cast<Claim*>(hash_search(claims, &id, HASH_ENTER, nullptr));
    c->open = false;
    c->held = false;
    c->data = HeldClaim{};
  }
  return c;
}

}  // namespace

void register_claim_callbacks() {
  RegisterXactCallback(on_xact, nullptr);
  RegisterSubXactCallback(on_subxact, nullptr);
}

void claim(const text* ns, const text* key, bool hashed) {
  Claim* c = entry(ns, key);
  c->hashed = hashed;
  c->in_block = IsTransactionBlock();
  if (c->open) return;
  log_change(c, true);  // first: it keeps what this claim replaces
  c->held = false;
}

void claim_held(const text* ns, const text* key, bool hashed, const HeldClaim& held) {
  Claim* c = entry(ns, key);
  c->hashed = hashed;
  c->in_block = IsTransactionBlock();
  if (c->open) return;  // begin answers in_flight for an open claim of its own first
  MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
  const bytea* hash = static_cast<const bytea*>(PG_DETOAST_DATUM_COPY(PointerGetDatum(held.request_hash)));
  const Jsonb* request =
      held.request == nullptr ? nullptr : reinterpret_cast<const Jsonb*>(PG_DETOAST_DATUM_COPY(PointerGetDatum(held.request)));
  MemoryContextSwitchTo(old);
  if (!c->held) ++held_count;
  log_change(c, true);  // first: it keeps what this claim replaces
  c->held = true;
  c->data = HeldClaim{held.fence, held.claimed_at, held.expires_at, hash, request};
}

const HeldClaim* held_claim(const text* ns, const text* key) {
  if (claims == nullptr) return nullptr;
  const ClaimId id{ns, key};
  auto* c = static_cast<Claim*>(hash_search(claims, &id, HASH_FIND, nullptr));
  return c != nullptr && c->open && c->held ? &c->data : nullptr;
}

long open_held_claims(const text* ns) {
  if (claims == nullptr) return 0;
  long n = 0;
  HASH_SEQ_STATUS seq;
  hash_seq_init(&seq, claims);
  while (const Claim* c = static_cast<const Claim*>(hash_seq_search(&seq)))
    if (c->open && c->held && same_bytes(c->id.ns, ns)) ++n;
  return n;
}

long held_locks() { return held_count; }

void finish(const text* ns, const text* key) {
  if (claims == nullptr) return;
  const ClaimId id{ns, key};
  auto* c = static_cast<Claim*>(hash_search(claims, &id, HASH_FIND, nullptr));
  if (c != nullptr && c->open) log_change(c, false);
}

}  // namespace idem::pg
