#include "automaton/regex.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "automaton/internal/regex_parser.h"

namespace maskd {
namespace {

// Node count with counted repeats expanded, saturating at `cap` + 1.
size_t ExpandedSize(const RegexNode& n, size_t cap) {
  size_t own = 1;
  for (const auto& c : n.children) {
    own += ExpandedSize(*c, cap);
    if (own > cap) return cap + 1;
  }
  if (n.kind == RegexNode::Kind::kRepeat) {
    uint64_t copies = n.max == RegexNode::kUnbounded ? std::max<uint32_t>(n.min, 1) : n.max;
    uint64_t total = 1 + static_cast<uint64_t>(own - 1) * std::max<uint64_t>(copies, 1);
    return total > cap ? cap + 1 : static_cast<size_t>(total);
  }
  return own;
}

}  // namespace

absl::StatusOr<Regex> Regex::Parse(std::string_view pattern, const RegexLimits& limits) {
  if (limits.max_nesting < 1 || limits.max_nesting > kMaxRegexNesting) {
    return absl::InvalidArgumentError(absl::StrCat("regex: max_nesting ", limits.max_nesting,
                                                   " is outside [1, ", kMaxRegexNesting, "]"));
  }
  if (pattern.size() > limits.max_pattern_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "regex: pattern of %d bytes exceeds the limit of %d bytes (max_pattern_bytes)",
        pattern.size(), limits.max_pattern_bytes));
  }
  auto root = automaton_internal::ParseRegexTree(pattern, limits);
  if (!root.ok()) return root.status();
  Regex re;
  re.root_ = std::move(*root);
  re.expanded_size_ = ExpandedSize(*re.root_, limits.max_nodes);
  if (re.expanded_size_ > limits.max_nodes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "regex: pattern expands to more than %d nodes (counted repeats multiply their body)",
        limits.max_nodes));
  }
  return re;
}

}  // namespace maskd
