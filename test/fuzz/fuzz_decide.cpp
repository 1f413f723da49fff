// fuzz_decide.cpp: libFuzzer target for the begin's decision
// (src/core/decide.hpp), driven through a small reference model of one
// key's store: three workers, each with its own transaction, run begins,
// commits, failures, forgets, rollbacks and COMMITs in the order the input
// says, while a clock passes leases. The model shows each begin what the
// server would (its look: the committed record, another transaction's
// uncommitted write as busy, a claim held by the key's lock, the lease) and
// applies the step core::decide chooses, as begin.cpp does. The input's
// first byte picks the namespace's lease (none, or one the clock can pass).
//
// Properties checked after every operation:
//  - one effect: at most one transaction ever commits a final record (its
//    work with it), and never two claims of the key are live at once
//    (neither finished nor taken over);
//  - a different request is never claimed, taken over or replayed: it is a
//    mismatch once a request is recorded;
//  - a final record always replays for its request (prior_result or
//    prior_error as recorded), and never changes;
//  - a fence proves only the claim that drew it: a transition with a fence
//    a takeover replaced changes nothing.
#include <cstddef>
#include <cstdint>

#include "core/decide.hpp"
#include "fuzz_support.hpp"

using idem::core::Found;
using idem::core::Look;
using idem::core::Place;
using idem::core::Step;

namespace {

constexpr int workers = 3;
constexpr int lease = 10;  // clock ticks, when the namespace has a lease

// The key's record as committed transactions left it.
struct Record {
  char status = 0;  // 0: none, 'i', 'c', 'f'
  int request = 0;
  long fence = 0;
  int attempt = 0;
  int updated = 0;  // clock of the claim or takeover
};

// A worker: its open transaction's view and what it holds.
struct Worker {
  bool open = false;      // a transaction is open
  bool wrote = false;     // it inserted or changed the record (uncommitted: busy for the others)
  Record mine;            // the record as this transaction wrote it
  bool held = false;      // it holds the key's claim by the lock alone (no row), unfinished
  bool locked = false;    // it holds the key's lock (to its transaction's end)
  long fence = 0;         // the fence of its last fresh claim (kept across transactions)
  bool finished = false;  // it finished its claim in this transaction
};

struct Model {
  bool leased;
  int clock = 0;
  long next_fence = 1;
  Record record;  // committed
  Worker w[workers];
  int final_commits = 0;
  int final_request = 0;
  char final_status = 0;

  // The live claims: the committed in_progress record (unless a takeover
  // holds it), and every open transaction's unfinished claim.
  int live_claims() const {
    int n = 0;
    bool rewritten = false;
    for (const Worker& x : w)
      if (x.open && !x.finished && (x.held || (x.wrote && x.mine.status == 'i'))) ++n, rewritten |= x.wrote;
    if (record.status == 'i' && !rewritten && !(leased && clock - record.updated >= lease)) ++n;
    return n;
  }

  // Another transaction than v's holds an uncommitted write or the key's lock.
  int writer_besides(int v) const {
    for (int u = 0; u < workers; ++u)
      if (u != v && w[u].open && w[u].wrote) return u;
    return -1;
  }
  bool locked_besides(int v) const {
    for (int u = 0; u < workers; ++u)
      if (u != v && w[u].open && w[u].locked) return true;
    return false;
  }

  // What worker v's begin with request r sees.
  Look look(int v, int r) const {
    const Worker& me = w[v];
    Look l{};
    l.key_locked = !locked_besides(v);
    if (me.held) {
      l.held_here = true;
      l.same_request = me.mine.request == r;
      return l;
    }
    const Record& seen = me.wrote ? me.mine : record;
    if (!me.wrote && writer_besides(v) >= 0) {
      l.found = Found::busy;
    } else if (seen.status == 0) {
      l.found = Found::nothing;
    } else {
      l.found = Found::row;
      l.status = seen.status;
      l.same_request = seen.request == r;
      l.own = me.wrote;
      l.lease_over = seen.status == 'i' && (leased ? clock - seen.updated >= lease : false);
    }
    return l;
  }

  void begin(int v, int r) {
    Worker& me = w[v];
    me.open = true;
    const Look l = look(v, r);
    const Step s = idem::core::decide(l);
    const Record& seen = me.wrote ? me.mine : record;
    switch (s) {
      case Step::claim: {
        FUZZ_CHECK(final_status == 0);
        const Place p{leased, true, false, 0, 1};
        me.fence = next_fence++;
        me.mine = Record{'i', r, me.fence, 1, clock};
        me.finished = false;
        if (idem::core::hold_by_lock(p)) me.held = me.locked = true; else me.wrote = true;
        break;
      }
      case Step::take_over:
        FUZZ_CHECK(seen.status == 'i' && seen.request == r && leased && clock - seen.updated >= lease);
        me.fence = next_fence++;
        me.mine = Record{'i', r, me.fence, seen.attempt + 1, clock};
        me.wrote = true, me.finished = false;
        break;
      case Step::prior_result:
      case Step::prior_error:
        FUZZ_CHECK(seen.status == (s == Step::prior_result ? 'c' : 'f') && seen.request == r);
        break;
      case Step::mismatch:
        FUZZ_CHECK(me.held ? me.mine.request != r : seen.status != 0 && seen.request != r);
        break;
      case Step::in_flight:
      case Step::wait:  // the model does not block: a wait that ran out answers in flight
        FUZZ_CHECK(final_status == 0 || l.found == Found::busy || me.wrote);
        break;
    }
    FUZZ_CHECK(live_claims() <= 1);
  }

  // idem_commit or idem_fail_permanent with the worker's fence: acts only
  // on the claim that drew it, in this transaction or committed unfinished.
  void finish(int v, char status) {
    Worker& me = w[v];
    if (!me.open) return;
    const bool mine_here = (me.held || me.wrote) && me.mine.status == 'i' && me.mine.fence == me.fence;
    const bool committed_mine = !me.wrote && record.status == 'i' && record.fence == me.fence &&
                                writer_besides(v) < 0;
    if (!mine_here && !committed_mine) return rollback(v);  // refused: the transaction aborts
    if (committed_mine) me.mine = record;
    me.mine.status = status;
    me.wrote = true, me.held = false, me.finished = true;
  }

  // idem_fail_transient: forgets a first attempt's claim of this transaction.
  void forget(int v) {
    Worker& me = w[v];
    if (!me.open || me.finished || me.mine.fence != me.fence || me.mine.attempt != 1) return;
    if (me.held) me.held = false, me.finished = true, me.mine = Record{};
    else if (me.wrote && me.mine.status == 'i') me.mine = Record{}, me.finished = true;
  }

  void rollback(int v) {
    const long fence = w[v].fence;
    w[v] = Worker{};
    w[v].fence = fence;
  }

  // COMMIT: refused (rolled back) while a claim is unfinished and nothing
  // may outlive the transaction (the claim guard); else the writes land.
  void commit(int v) {
    Worker& me = w[v];
    if (!me.open) return;
    const bool unfinished = (me.held || me.wrote) && me.mine.status == 'i' && !me.finished;
    if (unfinished && (!leased || me.held)) return rollback(v);
    if (me.wrote) {
      if (me.mine.status == 'c' || me.mine.status == 'f') {
        ++final_commits;
        if (final_status != 0) FUZZ_CHECK(final_status == me.mine.status && final_request == me.mine.request);
        final_status = me.mine.status, final_request = me.mine.request;
      }
      record = me.mine;
    }
    FUZZ_CHECK(final_commits <= 1);
    if (final_status != 0) FUZZ_CHECK(record.status == final_status && record.request == final_request);
    rollback(v);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Model m;
  m.leased = (data[0] & 1) != 0;
  for (std::size_t i = 1; i < size; ++i) {
    const int v = data[i] % workers, op = (data[i] / workers) % 8, r = (data[i] / 24) % 2;
    switch (op) {
      case 0: case 1: m.begin(v, r); break;
      case 2: m.finish(v, 'c'); break;
      case 3: m.finish(v, 'f'); break;
      case 4: m.forget(v); break;
      case 5: m.rollback(v); break;
      case 6: m.commit(v); break;
      case 7: m.clock += 1 + (data[i] / 24) * 3; break;
    }
  }
  return 0;
}
