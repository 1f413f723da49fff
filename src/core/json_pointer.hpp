// json_pointer.hpp: RFC 6901 JSON Pointers, and a set of them that the
// canonical walk asks, member by member and element by element, whether a
// value is left out of a namespace's request fingerprint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "utf8.hpp"

namespace idem::core {

// The most pointers one namespace names, and the most bytes of one.
inline constexpr std::size_t max_pointers = 64;
inline constexpr std::size_t max_pointer_bytes = 1024;

// The reference tokens of pointer (UTF-8), "~1" and "~0" decoded to "/" and
// "~". Throws Error 22023 for text that is not a pointer (not starting with
// "/", or a "~" not followed by 0 or 1), for "" (the whole document), and
// for a pointer over max_pointer_bytes.
std::vector<std::string> pointer_tokens(Slice pointer);

// A set of pointers as a trie in one flat block of trivially copyable
// nodes, so that the glue keeps it in PostgreSQL memory and walks it on
// frames a longjmp may cross. A node's children are contiguous and sorted
// by token bytes; a node where a pointer ends has none (all below it is
// left out with it).
class PointerSet {
 public:
  struct Node {
    std::uint32_t first_child;  // index into the nodes
    std::uint32_t child_count;
    std::uint32_t token_offset;  // into the token bytes
    std::uint32_t token_size;
    std::uint32_t ends;  // 1: a pointer names this value, which is left out (no padding: blocks compare bytewise)
  };

  // Bytes enough to build the set of these n pointers; throws as
  // pointer_tokens does, and Error 22023 for more than max_pointers
  // different ones (repeats count once).
  static std::size_t bound(const Slice* pointers, std::size_t n);

  // Builds the set into block (bound() bytes, aligned for Node) and returns
  // the bytes it used. Allocates only while it runs.
  static std::size_t build(const Slice* pointers, std::size_t n, void* block);

  explicit PointerSet(const void* block) noexcept : block_(static_cast<const unsigned char*>(block)) {}

  // The node of the whole document (never ends: "" is refused).
  const Node* root() const noexcept { return nodes(); }

  // The child of node whose token is token, or nullptr.
  const Node* child(const Node* node, Slice token) const noexcept;

  // The child of node for an array's element at index (its token in
  // decimal without leading zeros, as RFC 6901 writes an index), or nullptr.
  const Node* element(const Node* node, std::size_t index) const noexcept;

 private:
  const Node* nodes() const noexcept;
  const char* tokens() const noexcept;

  const unsigned char* block_;
};

static_assert(std::is_trivially_destructible_v<PointerSet> && std::is_trivially_copyable_v<PointerSet::Node>,
              "a PointerSet lives on frames a PostgreSQL longjmp may cross: see docs/internals.md");

}  // namespace idem::core
