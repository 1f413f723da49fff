// canonical.cpp: walks jsonb in canonical order and writes through JsonWriter;
// idem_canonical(jsonb) and idem_request_hash(jsonb).
//
// The walk reads each container with a non-descending iterator, so nested
// values arrive as pointers into the jsonb and nothing is copied or printed
// twice; an object's members are sorted by key (code-point order) before
// they are written. With a namespace's pointer set, the walk carries the
// set's node for the value it is at, and leaves out every member and
// element a pointer names. Everything alive on these frames is trivially
// destructible, because PostgreSQL calls here (palloc, numeric_out,
// check_stack_depth, CHECK_FOR_INTERRUPTS) may longjmp.
#include "canonical.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "../core/canonical_json.hpp"
#include "../core/error.hpp"
#include "../core/json_pointer.hpp"
#include "guard.hpp"
#include "pointers.hpp"
#include "text.hpp"

namespace idem::pg {

namespace {

struct Member {
  core::Slice key;  // UTF-8
  JsonbValue value;
};

// Key order for std::sort over member pointers. Sorting pointers with an
// inlined comparator instead of pg_qsort over whole members took sorting
// from a fifth of the time of a 1 MiB fingerprint to a few per cent (see
// docs/performance.md). Neither the comparator nor std::sort on pointers
// can throw or call PostgreSQL.
bool key_less(const Member* a, const Member* b) noexcept { return core::compare_keys(a->key, b->key) < 0; }

// Where the walk is: Whole below any pointer (the walk of 0.8.0, its frames
// as small, so that it reaches as deep within max_stack_depth), Pointed on
// the path of a pointer (the set, and the node of the value being written).
// A Pointed walk turns Whole where no pointer reaches below, so only a
// pointer's depth of levels (at most 1,024 bytes of it) uses its frames.
struct Whole {};
struct Pointed {
  const core::PointerSet* set;
  const core::PointerSet::Node* node;  // nullptr: no pointer reaches this value (write_below walks it Whole)
};

// Whether a child whose node in the set is found (nullptr: none) is left out.
bool left_out(const core::PointerSet::Node* found) noexcept { return found != nullptr && found->ends != 0; }

template <class At>
void write_container(core::JsonWriter& out, JsonbContainer* container, At at);

// A container below a Pointed value: Pointed when its node has children.
void write_below(core::JsonWriter& out, JsonbContainer* container, const Pointed& at) {
  if (at.node != nullptr && at.node->child_count != 0)
    write_container(out, container, at);
  else
    write_container(out, container, Whole{});
}
void write_below(core::JsonWriter& out, JsonbContainer* container, Whole) { write_container(out, container, Whole{}); }

template <class At>
void write_value(core::JsonWriter& out, const JsonbValue& v, At at) {
  switch (v.type) {
    case jbvNull:
      out.put("null", 4);
      break;
    case jbvBool:
      v.val.boolean ? out.put("true", 4) : out.put("false", 5);
      break;
    case jbvNumeric: {
      char* digits = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
      out.put(digits, std::strlen(digits));
      pfree(digits);
      break;
    }
    case jbvString:
      out.string(utf8_of(v.val.string.val, v.val.string.len));
      break;
    case jbvBinary:
      write_below(out, v.val.binary.data, at);
      break;
    default:
      throw core::Error(core::sqlstate::internal_error, "unexpected jsonb value type",
                        "Type " + std::to_string(static_cast<int>(v.type)) + ".");
  }
}

template <class At>
void write_array(core::JsonWriter& out, JsonbIterator* it, At at) {
  JsonbValue v;
  out.put('[');
  bool first = true;
  for (std::size_t index = 0; JsonbIteratorNext(&it, &v, true) == WJB_ELEM; ++index) {
    CHECK_FOR_INTERRUPTS();
    if constexpr (std::is_same_v<At, Pointed>) {
      const core::PointerSet::Node* below = at.set->element(at.node, index);
      if (left_out(below)) continue;
      if (!first) out.put(',');
      first = false;
      write_value(out, v, Pointed{at.set, below});
    } else {
      if (!first) out.put(',');
      first = false;
      write_value(out, v, at);
    }
  }
  out.put(']');
}

template <class At>
void write_object(core::JsonWriter& out, JsonbIterator* it, int count, At at) {
  const int capacity = count > 0 ? count : 1;
  static_assert(sizeof(Member) % alignof(Member*) == 0, "the pointer array follows the members");
  auto* members = static_cast<Member*>(palloc(capacity * (sizeof(Member) + sizeof(Member*))));
  auto** order = reinterpret_cast<Member**>(members + capacity);
  using Node = core::PointerSet::Node;
  const Node** below = nullptr;  // Pointed: each member's node, by the member's place
  if constexpr (std::is_same_v<At, Pointed>) below = static_cast<const Node**>(palloc(capacity * sizeof(Node*)));
  JsonbValue v;
  int n = 0;
  while (JsonbIteratorNext(&it, &v, true) == WJB_KEY) {
    members[n].key = utf8_of(v.val.string.val, v.val.string.len);
    JsonbIteratorNext(&it, &members[n].value, true);  // WJB_VALUE
    if constexpr (std::is_same_v<At, Pointed>) {
      if (left_out(below[n] = at.set->child(at.node, members[n].key))) continue;
    }
    order[n] = &members[n];
    ++n;
  }
  std::sort(order, order + n, key_less);
  out.put('{');
  for (int i = 0; i < n; ++i) {
    CHECK_FOR_INTERRUPTS();
    if (i != 0) out.put(',');
    out.string(order[i]->key);
    out.put(':');
    if constexpr (std::is_same_v<At, Pointed>)
      write_value(out, order[i]->value, Pointed{at.set, below[order[i] - members]});
    else
      write_value(out, order[i]->value, at);
  }
  out.put('}');
  if (below != nullptr) pfree(below);
  pfree(members);
}

template <class At>
void write_container(core::JsonWriter& out, JsonbContainer* container, At at) {
  check_stack_depth();
  JsonbIterator* it = JsonbIteratorInit(container);
  JsonbValue v;
  if (JsonbIteratorNext(&it, &v, true) == WJB_BEGIN_OBJECT) {
    write_object(out, it, v.val.object.nPairs, at);
  } else if (v.val.array.rawScalar) {  // a top-level scalar is stored as a one-element array
    JsonbIteratorNext(&it, &v, true);
    write_value(out, v, Whole{});  // no pointer but "" names it, and "" is refused
    JsonbIteratorNext(&it, &v, true);  // WJB_END_ARRAY frees the iterator
  } else {
    write_array(out, it, at);
  }
}

// The walk of container, with the pointer set block ignore (nullptr: none).
void write_request(core::JsonWriter& out, JsonbContainer* container, const void* ignore) {
  if (ignore == nullptr) return write_container(out, container, Whole{});
  const core::PointerSet set(ignore);
  write_below(out, container, Pointed{&set, set.root()});
}

void sha256_sink(void* context, const char* data, std::size_t size) {
  static_cast<core::Sha256*>(context)->update(data, size);
}

void discard_sink(void*, const char*, std::size_t) noexcept {}

void string_info_sink(void* context, const char* data, std::size_t size) {
  appendBinaryStringInfo(static_cast<StringInfo>(context), data, static_cast<int>(size));
}

// One digest context for the backend's lifetime, reset before each use: it
// outlives any error (nothing to leak when a longjmp abandons a walk) and
// costs no allocation per call. Deliberately never freed.
core::Sha256& backend_sha256() {
  static core::Sha256* sha = new core::Sha256();
  return *sha;
}

}  // namespace

core::Digest request_hash(JsonbContainer* container, const void* ignore) {
  core::Sha256& sha = backend_sha256();
  sha.reset();
  core::JsonWriter out(sha256_sink, &sha);
  write_request(out, container, ignore);
  out.flush();
  return sha.finish();
}

bytea* request_hash_bytea(JsonbContainer* container, const void* ignore) {
  const core::Digest digest = request_hash(container, ignore);
  auto* out = static_cast<bytea*>(palloc(VARHDRSZ + digest.size()));
  SET_VARSIZE(out, VARHDRSZ + digest.size());
  std::memcpy(VARDATA(out), digest.data(), digest.size());
  return out;
}

text* canonical_text(JsonbContainer* container, const void* ignore) {
  StringInfoData buf;
  initStringInfo(&buf);
  core::JsonWriter out(string_info_sink, &buf);
  write_request(out, container, ignore);
  out.flush();
  return text_of_utf8({buf.data, static_cast<std::size_t>(buf.len)});
}

void check_utf8(JsonbContainer* container) {
  if (GetDatabaseEncoding() != PG_SQL_ASCII) return;
  core::JsonWriter out(discard_sink, nullptr);
  write_container(out, container, Whole{});  // converting each string to UTF-8 validates it
}

}  // namespace idem::pg

using namespace idem;

IDEM_FUNCTION(idem_canonical) { PG_RETURN_TEXT_P(pg::canonical_text(&PG_GETARG_JSONB_P(0)->root)); }

IDEM_FUNCTION(idem_request_hash) { PG_RETURN_BYTEA_P(pg::request_hash_bytea(&PG_GETARG_JSONB_P(0)->root)); }

namespace {

// The pointers argument of the two-argument forms: NULL ignores nothing.
const void* ignored_arg(FunctionCallInfo fcinfo) {
  Size size;
  return PG_ARGISNULL(1) ? nullptr : pg::pointer_set(PG_GETARG_ARRAYTYPE_P(1), &size);
}

}  // namespace

// idem_canonical(payload, ignore) (0.9.0): the canonical text with the
// members and elements the pointers name left out, as a namespace whose
// fingerprint ignores them hashes it. NULL payload: NULL.
IDEM_FUNCTION(idem_canonical_ignoring) {
  if (PG_ARGISNULL(0)) PG_RETURN_NULL();
  const void* ignore = ignored_arg(fcinfo);
  PG_RETURN_TEXT_P(pg::canonical_text(&PG_GETARG_JSONB_P(0)->root, ignore));
}

// idem_request_hash(payload, ignore) (0.9.0): the fingerprint of that text.
IDEM_FUNCTION(idem_request_hash_ignoring) {
  if (PG_ARGISNULL(0)) PG_RETURN_NULL();
  const void* ignore = ignored_arg(fcinfo);
  PG_RETURN_BYTEA_P(pg::request_hash_bytea(&PG_GETARG_JSONB_P(0)->root, ignore));
}
