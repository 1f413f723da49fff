// fuzz_json_pointer.cpp: libFuzzer target for idem::core::pointer_tokens and
// idem::core::PointerSet (the JSON Pointers a namespace's fingerprint ignores).
//
// The input is a list of pointers, one per line. Properties checked:
//  - pointer_tokens agrees with an independent model of RFC 6901 written
//    here: refused (22023) exactly when the text is empty, over 1,024 bytes,
//    does not start with "/", or has a "~" not followed by "0" or "1";
//    otherwise the tokens the model decodes;
//  - with every pointer valid and at most 64 different ones: bound() is
//    enough (build() writes no byte past it), the block does not depend on
//    the pointers' order or repeats, and a walk of the set leaves a path out
//    exactly when some pointer's tokens are a prefix of it (probed with each
//    pointer's path, longer and altered paths, and array indexes).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_pointer.hpp"
#include "fuzz_support.hpp"

using idem::core::PointerSet;
using idem::core::Slice;
using idem_fuzz::capture;

namespace {

using Tokens = std::vector<std::string>;

// The model: RFC 6901 section 3 and 4, as the docs state the limits.
bool model_tokens(const std::string& p, Tokens& out) {
  out.clear();
  if (p.empty() || p.size() > 1024 || p[0] != '/') return false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '/') {
      out.emplace_back();
    } else if (p[i] == '~') {
      if (i + 1 >= p.size() || (p[i + 1] != '0' && p[i + 1] != '1')) return false;
      out.back() += p[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out.back() += p[i];
    }
  }
  return true;
}

// Whether the set leaves out the value at path, walking as the glue walks.
bool set_leaves_out(const PointerSet& set, const Tokens& path) {
  const PointerSet::Node* node = set.root();
  for (const std::string& token : path) {
    node = set.child(node, {token.data(), token.size()});
    if (node == nullptr) return false;
    if (node->ends != 0) return true;
  }
  return false;
}

// Whether some pointer's tokens are a prefix of path (a proper or equal one; never empty).
bool model_leaves_out(const std::vector<Tokens>& pointers, const Tokens& path) {
  for (const Tokens& p : pointers)
    if (!p.empty() && p.size() <= path.size() && std::equal(p.begin(), p.end(), path.begin())) return true;
  return false;
}

// Builds the set of pointers into a fresh buffer with a canary past bound();
// returns the used bytes.
std::string build(const std::vector<std::string>& pointers) {
  std::vector<Slice> slices;
  for (const std::string& p : pointers) slices.push_back({p.data(), p.size()});
  const std::size_t bound = PointerSet::bound(slices.data(), slices.size());
  std::vector<std::uint64_t> block(bound / 8 + 9, 0xA5A5A5A5A5A5A5A5ull);
  const std::size_t used = PointerSet::build(slices.data(), slices.size(), block.data());
  FUZZ_CHECK(used <= bound);
  const auto* bytes = reinterpret_cast<const unsigned char*>(block.data());
  for (std::size_t i = bound; i < block.size() * 8; ++i) FUZZ_CHECK(bytes[i] == 0xA5);
  return std::string(reinterpret_cast<const char*>(block.data()), used);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> pointers(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      if (pointers.size() == 80) break;
      pointers.emplace_back();
    } else {
      pointers.back() += static_cast<char>(data[i]);
    }
  }

  std::vector<Tokens> parsed;
  bool all_valid = true;
  for (const std::string& p : pointers) {
    Tokens want;
    const bool valid = model_tokens(p, want);
    Tokens got;
    const auto o = capture([&] { got = idem::core::pointer_tokens({p.data(), p.size()}); });
    FUZZ_CHECK(o.threw == !valid);
    if (o.threw) {
      FUZZ_CHECK(o.sqlstate == "22023");
      all_valid = false;
    } else {
      FUZZ_CHECK(got == want);
      parsed.push_back(got);
    }
  }
  const std::set<std::string> distinct(pointers.begin(), pointers.end());
  if (!all_valid) return 0;
  if (distinct.size() > idem::core::max_pointers) {
    std::vector<Slice> slices;
    for (const std::string& p : pointers) slices.push_back({p.data(), p.size()});
    const auto o = capture([&] { (void)PointerSet::bound(slices.data(), slices.size()); });
    FUZZ_CHECK(o.threw && o.sqlstate == "22023");
    return 0;
  }

  const std::string block = build(pointers);
  // The same pointers reversed, and each once: the same bytes.
  std::vector<std::string> reversed(pointers.rbegin(), pointers.rend());
  FUZZ_CHECK(build(reversed) == block);
  FUZZ_CHECK(build(std::vector<std::string>(distinct.begin(), distinct.end())) == block);

  std::vector<std::uint64_t> aligned(block.size() / 8 + 1);
  std::memcpy(aligned.data(), block.data(), block.size());
  const PointerSet set(aligned.data());
  FUZZ_CHECK(set.root()->ends == 0);
  for (const Tokens& p : parsed) {
    std::vector<Tokens> probes{p};
    Tokens longer = p;
    longer.push_back("x");
    probes.push_back(longer);
    Tokens altered = p;
    altered.back() += "~";
    probes.push_back(altered);
    if (p.size() > 1) probes.emplace_back(p.begin(), p.end() - 1);
    for (const Tokens& probe : probes) FUZZ_CHECK(set_leaves_out(set, probe) == model_leaves_out(parsed, probe));
    // element(node, i) is child(node, "i") for the node of each pointer's parent path.
    const PointerSet::Node* node = set.root();
    for (std::size_t depth = 0; depth + 1 < p.size() && node != nullptr && node->ends == 0; ++depth)
      node = set.child(node, {p[depth].data(), p[depth].size()});
    if (node != nullptr && node->ends == 0)
      for (std::size_t i = 0; i < 16; ++i) {
        const std::string digits = std::to_string(i);
        FUZZ_CHECK(set.element(node, i) == set.child(node, {digits.data(), digits.size()}));
      }
  }
  return 0;
}
