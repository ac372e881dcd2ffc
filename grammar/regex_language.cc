#include "grammar/regex_language.h"

#include <vector>

namespace maskd::grammar {

RegexLanguage AnalyzeRegex(const RegexNode& root) {
  // Post-order walk with an explicit stack.
  struct Frame {
    const RegexNode* node;
    size_t next_child;
    std::vector<RegexLanguage> kids;
  };
  std::vector<Frame> stack;
  stack.push_back({&root, 0, {}});
  RegexLanguage result;
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next_child < f.node->children.size()) {
      const RegexNode* child = f.node->children[f.next_child++].get();
      stack.push_back({child, 0, {}});
      continue;
    }
    RegexLanguage out;
    const RegexNode& n = *f.node;
    switch (n.kind) {
      case RegexNode::Kind::kEmpty:
        out = {true, false};
        break;
      case RegexNode::Kind::kSet:
        out = {!n.set.empty(), !n.set.empty()};
        break;
      case RegexNode::Kind::kConcat: {
        out.any = true;
        for (const auto& k : f.kids) out.any = out.any && k.any;
        for (const auto& k : f.kids) out.non_empty = out.non_empty || k.non_empty;
        out.non_empty = out.any && out.non_empty;
        break;
      }
      case RegexNode::Kind::kAlternate:
        for (const auto& k : f.kids) {
          out.any = out.any || k.any;
          out.non_empty = out.non_empty || k.non_empty;
        }
        break;
      case RegexNode::Kind::kRepeat: {
        const RegexLanguage& k = f.kids.empty() ? RegexLanguage{true, false} : f.kids[0];
        out.any = n.min == 0 || k.any;
        out.non_empty = k.non_empty && n.max >= 1;
        break;
      }
    }
    stack.pop_back();
    if (stack.empty()) {
      result = out;
    } else {
      stack.back().kids.push_back(out);
    }
  }
  return result;
}

}  // namespace maskd::grammar
