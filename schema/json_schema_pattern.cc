// JSON Schema `pattern` (ECMA-262 syntax, search semantics) translated to a
// regex over the JSON-encoded content of a string: the pattern's tree
// (pattern_tree.h) with every character set rewritten as the alternation of
// its encoded forms (json_string_class.h). Unanchored ends get any-character
// runs.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schema/internal/json_schema_internal.h"
#include "schema/internal/json_string_class.h"
#include "schema/internal/pattern_tree.h"

namespace maskd::json_schema_internal {
namespace {

bool StripStart(PNode& n) {
  switch (n.kind) {
    case PNode::kBol: n = PNode{}; return true;
    case PNode::kCat: return !n.kids.empty() && StripStart(n.kids[0]);
    case PNode::kAlt: {
      for (auto& k : n.kids) {
        PNode copy = k;
        if (!StripStart(copy)) return false;
      }
      for (auto& k : n.kids) StripStart(k);
      return true;
    }
    default: return false;
  }
}

bool StripEnd(PNode& n) {
  switch (n.kind) {
    case PNode::kEol: n = PNode{}; return true;
    case PNode::kCat: return !n.kids.empty() && StripEnd(n.kids.back());
    case PNode::kAlt: {
      for (auto& k : n.kids) {
        PNode copy = k;
        if (!StripEnd(copy)) return false;
      }
      for (auto& k : n.kids) StripEnd(k);
      return true;
    }
    default: return false;
  }
}

// Emits the node; nullopt when its language is empty.
absl::StatusOr<std::optional<std::string>> Emit(const PNode& n) {
  switch (n.kind) {
    case PNode::kEmpty: return std::string();
    case PNode::kBol: case PNode::kEol:
      return absl::InvalidArgumentError("anchor ^ or $ inside the pattern");
    case PNode::kSet: {
      std::string s = EncodeSet(n.set);
      if (s.empty()) return std::optional<std::string>();
      return s;
    }
    case PNode::kCat: {
      std::string out;
      for (auto& k : n.kids) {
        auto r = Emit(k);
        if (!r.ok()) return r.status();
        if (!*r) return std::optional<std::string>();
        const std::string& s = **r;
        if (k.kind == PNode::kAlt && s.size() > 0) out += "(?:" + s + ")";
        else out += s;
      }
      return out;
    }
    case PNode::kAlt: {
      std::vector<std::string> parts;
      for (auto& k : n.kids) {
        auto r = Emit(k);
        if (!r.ok()) return r.status();
        if (*r) parts.push_back(**r);
      }
      if (parts.empty()) return std::optional<std::string>();
      return absl::StrJoin(parts, "|");
    }
    case PNode::kRep: {
      auto r = Emit(n.kids[0]);
      if (!r.ok()) return r.status();
      if (!*r) {
        if (n.min == 0) return std::string();
        return std::optional<std::string>();
      }
      if ((*r)->empty()) return std::string();
      if (n.min > 1000) return absl::InvalidArgumentError("repeat count above 1000");
      std::string q;
      int mx = n.max > 1000 ? -1 : n.max;
      if (n.min == 0 && mx == -1) q = "*";
      else if (n.min == 1 && mx == -1) q = "+";
      else if (n.min == 0 && mx == 1) q = "?";
      else if (mx == -1) q = absl::StrCat("{", n.min, ",}");
      else if (mx == n.min) q = absl::StrCat("{", n.min, "}");
      else q = absl::StrCat("{", n.min, ",", mx, "}");
      if (n.min == 1 && mx == 1) q = "";
      return absl::StrCat("(?:", **r, ")", q);
    }
  }
  return std::string();
}

// Folds length bounds into a pattern body made of sets and one repeated set.
bool ApplyLength(PNode& body, int64_t min_len, int64_t max_len) {
  std::vector<PNode*> items;
  if (body.kind == PNode::kCat) {
    for (auto& k : body.kids) items.push_back(&k);
  } else {
    items.push_back(&body);
  }
  int64_t fixed = 0;
  PNode* var = nullptr;
  for (PNode* k : items) {
    if (k->kind == PNode::kSet) {
      ++fixed;
    } else if (k->kind == PNode::kEmpty) {
    } else if (k->kind == PNode::kRep && k->kids[0].kind == PNode::kSet) {
      if (k->min == k->max) {
        fixed += k->min;
      } else {
        if (var) return false;
        var = k;
      }
    } else {
      return false;
    }
  }
  int64_t lo = std::max<int64_t>(0, min_len - fixed);
  int64_t hi = max_len < 0 ? -1 : max_len - fixed;
  if (!var) return fixed >= min_len && (max_len < 0 || fixed <= max_len);
  int64_t vmin = std::max<int64_t>(var->min, lo);
  int64_t vmax = var->max < 0 ? hi : (hi < 0 ? var->max : std::min<int64_t>(var->max, hi));
  if (vmax >= 0 && vmax < vmin) return false;
  if (vmin > 1000 || vmax > 1000) return false;
  var->min = static_cast<int>(vmin);
  var->max = static_cast<int>(vmax);
  return true;
}

}  // namespace

absl::StatusOr<std::string> PatternToJsonStringRegex(std::string_view pattern, bool anchored,
                                                     bool* was_anchored,
                                                     std::pair<int64_t, int64_t> length,
                                                     bool* length_applied, int max_nesting) {
  if (length_applied) *length_applied = false;
  auto parsed = ParsePattern(pattern, max_nesting);
  if (!parsed.ok()) return parsed.status();
  PNode root = std::move(*parsed);
  std::vector<PNode> branches;
  if (root.kind == PNode::kAlt) {
    // Per-branch anchors only when the branches differ.
    PNode copy = root;
    bool s = StripStart(copy), e = StripEnd(copy);
    if (s || e) {
      branches.push_back(root);
    } else {
      branches = root.kids;
    }
  } else {
    branches.push_back(root);
  }
  const std::string any = JsonCharRegex() + "*";
  std::vector<std::string> parts;
  if (was_anchored) *was_anchored = true;
  for (auto& b : branches) {
    bool anchored_start = StripStart(b);
    bool anchored_end = StripEnd(b);
    if (was_anchored && !(anchored_start && anchored_end)) *was_anchored = false;
    if (anchored) anchored_start = anchored_end = true;
    if (length_applied && branches.size() == 1 && anchored_start && anchored_end) {
      *length_applied = ApplyLength(b, length.first, length.second);
    }
    auto r = Emit(b);
    if (!r.ok()) return r.status();
    if (!*r) continue;
    std::string body = **r;
    if (b.kind == PNode::kAlt) body = "(?:" + body + ")";
    parts.push_back(absl::StrCat(anchored_start ? "" : any, body, anchored_end ? "" : any));
  }
  if (parts.empty()) return absl::InvalidArgumentError("pattern matches no string");
  if (parts.size() == 1) return parts[0];
  return "(?:" + absl::StrJoin(parts, "|") + ")";
}

}  // namespace maskd::json_schema_internal
