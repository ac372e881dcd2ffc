#include "grammar/regex_language.h"

#include <algorithm>
#include <vector>

namespace maskd::grammar {
namespace {

constexpr uint64_t kNoMatch = RegexLanguage::kNoMatch;

uint64_t Add(uint64_t a, uint64_t b) { return a > kNoMatch - b ? kNoMatch : a + b; }
uint64_t Mul(uint64_t a, uint64_t b) {
  return a != 0 && b > kNoMatch / a ? kNoMatch : a * b;
}

// UTF-8 length of codepoint `c`, and its lead byte (increasing with c).
uint64_t Utf8Length(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }
uint32_t LeadByte(uint32_t c) {
  return c < 0x80 ? c : c < 0x800 ? 0xC0 | (c >> 6) : c < 0x10000 ? 0xE0 | (c >> 12) : 0xF0 | (c >> 18);
}

// Each byte sequence of a set's UTF-8 (automaton/internal/utf8_ranges.h)
// costs at most one state per byte past its first; a codepoint range splits
// into at most 16 sequences (per encoded length n, at most 2n - 1), which
// hold at most 0 + 3 * 1 + 5 * 2 + 7 * 3 such bytes.
constexpr uint64_t kNfaStatesPerRange = 34;

// Sets bytes [lo, hi] in `words`.
void SetBytes(uint32_t lo, uint32_t hi, std::array<uint64_t, 4>* words) {
  for (uint32_t w = lo >> 6; w <= hi >> 6; ++w) {
    const uint32_t from = std::max(lo, w * 64) - w * 64, to = std::min(hi, w * 64 + 63) - w * 64;
    const uint64_t ones = to - from == 63 ? ~uint64_t{0} : ((uint64_t{1} << (to - from + 1)) - 1);
    (*words)[w] |= ones << from;
  }
}

// The language of the empty string.
RegexLanguage EmptyLanguage() {
  RegexLanguage out;
  out.any = out.nullable = true;
  out.min_bytes = 0;
  return out;
}

RegexLanguage SetLanguage(const CodepointSet& set) {
  RegexLanguage out;
  out.any = out.non_empty = !set.empty();
  out.nfa_states = 1;  // its entry state, with or without edges
  if (set.empty()) return out;
  out.min_bytes = Utf8Length(set.ranges().front().first);
  out.nfa_states += kNfaStatesPerRange * set.ranges().size();
  for (const auto& [lo, hi] : set.ranges()) {
    if (lo < 0x80) SetBytes(lo, std::min<uint32_t>(hi, 0x7F), &out.bytes);
    if (hi < 0x80) continue;
    SetBytes(0x80, 0xBF, &out.bytes);  // continuation bytes
    SetBytes(LeadByte(std::max<uint32_t>(lo, 0x80)), LeadByte(hi), &out.bytes);
  }
  return out;
}

// A concatenation's or an alternation's language before its first child.
RegexLanguage Identity(RegexNode::Kind kind) {
  if (kind != RegexNode::Kind::kAlternate) return EmptyLanguage();
  RegexLanguage out;
  out.nfa_states = 1;  // its entry state
  return out;
}

// `out` (a concatenation's or an alternation's language so far, from
// Identity) with child `k` added.
void AddChild(RegexNode::Kind kind, const RegexLanguage& k, RegexLanguage* out) {
  for (size_t w = 0; w < 4; ++w) out->bytes[w] |= k.bytes[w];
  out->nfa_states = Add(out->nfa_states, k.nfa_states);
  if (kind == RegexNode::Kind::kConcat) {
    out->non_empty = out->non_empty || k.non_empty;
    out->any = out->any && k.any;
    out->nullable = out->nullable && k.nullable;
    out->min_bytes = k.min_bytes == kNoMatch ? kNoMatch : Add(out->min_bytes, k.min_bytes);
  } else {
    out->any = out->any || k.any;
    out->non_empty = out->non_empty || k.non_empty;
    out->nullable = out->nullable || k.nullable;
    out->min_bytes = std::min(out->min_bytes, k.min_bytes);
  }
}

// The language of repeat node `n` of body language `k`.
RegexLanguage RepeatLanguage(const RegexNode& n, const RegexLanguage& k) {
  RegexLanguage out;
  out.bytes = k.bytes;
  out.any = n.min == 0 || k.any;
  out.non_empty = k.non_empty && n.max >= 1;
  out.nullable = n.min == 0 || k.nullable;
  out.min_bytes = n.min == 0 ? 0 : k.min_bytes == kNoMatch ? kNoMatch : Mul(k.min_bytes, n.min);
  // Unbounded: a loop state, the body in it, and min copies; bounded: max
  // copies and a state per optional one. A template's hole besides.
  out.nfa_states = n.max == RegexNode::kUnbounded
                       ? Add(2, Mul(Add(uint64_t{n.min}, 1), k.nfa_states))
                       : Add(Add(uint64_t{n.max} - n.min, 1), Mul(n.max, k.nfa_states));
  return out;
}

}  // namespace

std::bitset<256> RegexLanguage::ByteSet() const {
  std::bitset<256> out;
  for (uint32_t b = 0; b < 256; ++b) {
    if ((bytes[b >> 6] >> (b & 63)) & 1) out.set(b);
  }
  return out;
}

RegexLanguage AnalyzeRegex(const RegexNode& root) {
  // Post-order walk with an explicit stack; a concatenation or alternation
  // folds its children in as they finish, a repeat keeps its body's.
  struct Frame {
    const RegexNode* node;
    size_t next_child;
    RegexLanguage acc;
  };
  auto open = [](const RegexNode* n) {
    return Frame{n, 0, n->kind == RegexNode::Kind::kSet ? SetLanguage(n->set) : Identity(n->kind)};
  };
  std::vector<Frame> stack;
  stack.push_back(open(&root));
  while (true) {
    Frame& f = stack.back();
    if (f.next_child < f.node->children.size()) {
      const RegexNode* child = f.node->children[f.next_child++].get();
      stack.push_back(open(child));
      continue;
    }
    RegexLanguage out = std::move(f.acc);
    switch (f.node->kind) {
      case RegexNode::Kind::kConcat: out.non_empty = out.any && out.non_empty; break;
      case RegexNode::Kind::kRepeat: out = RepeatLanguage(*f.node, out); break;
      default: break;
    }
    stack.pop_back();
    if (stack.empty()) {
      out.nfa_states = Add(out.nfa_states, 1);  // BuildNfa's match state
      return out;
    }
    Frame& parent = stack.back();
    if (parent.node->kind == RegexNode::Kind::kRepeat) {
      parent.acc = out;
    } else {
      AddChild(parent.node->kind, out, &parent.acc);
    }
  }
}

}  // namespace maskd::grammar
