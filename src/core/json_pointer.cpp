// json_pointer.cpp: parsing RFC 6901 pointers and the flat trie of a set of them.
#include "json_pointer.hpp"

#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "canonical_json.hpp"
#include "error.hpp"

namespace idem::core {

namespace {

struct Header {
  std::uint32_t node_count;
  std::uint32_t token_bytes;
};

// The 1-based character position of byte i of UTF-8 text s, for a message.
std::size_t character_at(Slice s, std::size_t i) {
  std::size_t n = 1;
  for (std::size_t b = 0; b < i && b < s.size; ++b)
    if ((static_cast<unsigned char>(s.data[b]) & 0xC0) != 0x80) ++n;
  return n;
}

// A pointer's trie while the set is built.
struct Tree {
  std::map<std::string, std::unique_ptr<Tree>> children;  // byte order, as compare_keys
  bool ends = false;
};

}  // namespace

std::vector<std::string> pointer_tokens(Slice pointer) {
  if (pointer.size == 0)
    throw Error(sqlstate::invalid_parameter_value, "a fingerprint cannot ignore the whole request",
                "The JSON Pointer \"\" names the whole document; name members or elements, such as \"/trace_id\".");
  if (pointer.data[0] != '/')
    throw Error(sqlstate::invalid_parameter_value, "invalid JSON Pointer",
                "A JSON Pointer (RFC 6901) starts with \"/\", as \"/trace_id\" or \"/items/0\" do.");
  if (pointer.size > max_pointer_bytes)
    throw Error(sqlstate::invalid_parameter_value, "JSON Pointer is too long",
                "It has " + std::to_string(pointer.size) + " bytes in UTF-8; at most " +
                    std::to_string(max_pointer_bytes) + " are allowed.");
  std::vector<std::string> tokens;
  for (std::size_t i = 0; i < pointer.size; ++i) {
    const char c = pointer.data[i];
    if (c == '/') {
      tokens.emplace_back();
    } else if (c != '~') {
      tokens.back() += c;
    } else if (i + 1 < pointer.size && (pointer.data[i + 1] == '0' || pointer.data[i + 1] == '1')) {
      tokens.back() += pointer.data[++i] == '0' ? '~' : '/';
    } else {
      throw Error(sqlstate::invalid_parameter_value, "invalid JSON Pointer",
                  "\"~\" is written \"~0\" and \"/\" inside a name \"~1\" (RFC 6901); the \"~\" at character " +
                      std::to_string(character_at(pointer, i)) + " is followed by neither.");
    }
  }
  return tokens;
}

std::size_t PointerSet::bound(const Slice* pointers, std::size_t n) {
  std::set<std::string> distinct;  // a pointer given twice counts once
  for (std::size_t i = 0; i < n; ++i) distinct.emplace(pointers[i].data, pointers[i].size);
  if (distinct.size() > max_pointers)
    throw Error(sqlstate::invalid_parameter_value, "too many JSON Pointers for one fingerprint",
                "There are " + std::to_string(distinct.size()) + " different ones; at most " +
                    std::to_string(max_pointers) + " are allowed.");
  // Over the different pointers only: build() merges repeats, and a long
  // array of one pointer must not ask for memory in proportion to it.
  std::size_t nodes = 1, bytes = 0;
  for (const std::string& pointer : distinct)
    for (const std::string& token : pointer_tokens({pointer.data(), pointer.size()})) ++nodes, bytes += token.size();
  return sizeof(Header) + nodes * sizeof(Node) + bytes;
}

std::size_t PointerSet::build(const Slice* pointers, std::size_t n, void* block) {
  (void)bound(pointers, n);  // the same checks, whoever calls
  Tree root;
  for (std::size_t i = 0; i < n; ++i) {
    Tree* at = &root;
    for (const std::string& token : pointer_tokens(pointers[i])) {
      if (at->ends) break;  // a shorter pointer leaves this one out already
      auto& child = at->children[token];
      if (!child) child = std::make_unique<Tree>();
      at = child.get();
    }
    at->ends = true;
    at->children.clear();
  }
  // Breadth first, so that each node's children are contiguous.
  std::vector<const Tree*> order{&root};
  std::vector<Node> nodes(1, Node{0, 0, 0, 0, 0});
  std::string tokens;
  for (std::size_t i = 0; i < order.size(); ++i) {
    nodes[i].first_child = static_cast<std::uint32_t>(nodes.size());
    nodes[i].child_count = static_cast<std::uint32_t>(order[i]->children.size());
    for (const auto& [token, child] : order[i]->children) {
      nodes.push_back(Node{0, 0, static_cast<std::uint32_t>(tokens.size()), static_cast<std::uint32_t>(token.size()),
                           child->ends ? 1u : 0u});
      tokens += token;
      order.push_back(child.get());
    }
  }
  auto* out = static_cast<unsigned char*>(block);
  const Header header{static_cast<std::uint32_t>(nodes.size()), static_cast<std::uint32_t>(tokens.size())};
  std::memcpy(out, &header, sizeof header);
  std::memcpy(out + sizeof header, nodes.data(), nodes.size() * sizeof(Node));
  if (!tokens.empty()) std::memcpy(out + sizeof header + nodes.size() * sizeof(Node), tokens.data(), tokens.size());
  return sizeof header + nodes.size() * sizeof(Node) + tokens.size();
}

const PointerSet::Node* PointerSet::nodes() const noexcept {
  return reinterpret_cast<const Node*>(block_ + sizeof(Header));
}

const char* PointerSet::tokens() const noexcept {
  Header header;
  std::memcpy(&header, block_, sizeof header);
  return reinterpret_cast<const char*>(block_ + sizeof(Header) + header.node_count * sizeof(Node));
}

const PointerSet::Node* PointerSet::child(const Node* node, Slice token) const noexcept {
  const Node* first = nodes() + node->first_child;
  std::size_t lo = 0, hi = node->child_count;
  const char* bytes = tokens();
  while (lo < hi) {  // binary search over the sorted children
    const std::size_t mid = lo + (hi - lo) / 2;
    const int c = compare_keys({bytes + first[mid].token_offset, first[mid].token_size}, token);
    if (c == 0) return first + mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return nullptr;
}

const PointerSet::Node* PointerSet::element(const Node* node, std::size_t index) const noexcept {
  if (node->child_count == 0) return nullptr;
  char digits[24];
  std::size_t at = sizeof digits;
  do {
    digits[--at] = static_cast<char>('0' + index % 10);
    index /= 10;
  } while (index != 0);
  return child(node, {digits + at, sizeof digits - at});
}

}  // namespace idem::core
