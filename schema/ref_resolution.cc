// $ref resolution: local JSON pointers (percent- and ~-decoded), $anchor and
// draft-4 "id" anchors, absolute references to the root $id; on the regex
// route, recursion unrolled max_recursion_depth times and then cut.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "schema/internal/json_access.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

absl::StatusOr<const json*> Converter::ResolvePointer(const std::string& fragment,
                                                      const std::string& ref,
                                                      const std::string& ptr,
                                                      std::string* target_ptr) {
  // fragment: after '#', percent-encoded JSON pointer.
  std::string decoded;
  for (size_t i = 0; i < fragment.size(); ++i) {
    if (fragment[i] == '%' && i + 2 < fragment.size()) {
      int v = 0;
      bool ok = true;
      for (int k = 1; k <= 2; ++k) {
        char c = fragment[i + k];
        int d = c >= '0' && c <= '9' ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) ok = false;
        v = v * 16 + d;
      }
      if (ok) {
        decoded.push_back(static_cast<char>(v));
        i += 2;
        continue;
      }
    }
    decoded.push_back(fragment[i]);
  }
  if (!decoded.empty() && decoded[0] != '/') {
    // A plain-name fragment: $anchor or draft-4..7 "id": "#name".
    auto it = Anchors().find(decoded);
    if (it == Anchors().end()) {
      return Invalid(absl::StrCat("unknown $ref \"", Shown(ref), "\" at ", Where(ptr)));
    }
    *target_ptr = it->second.first;
    return it->second.second;
  }
  const json* cur = &root_;
  std::string out;
  size_t i = 0;
  while (i < decoded.size()) {
    size_t j = decoded.find('/', i + 1);
    if (j == std::string::npos) j = decoded.size();
    std::string tok = decoded.substr(i + 1, j - i - 1);
    std::string key;
    for (size_t k = 0; k < tok.size(); ++k) {
      if (tok[k] == '~' && k + 1 < tok.size() && (tok[k + 1] == '0' || tok[k + 1] == '1')) {
        key.push_back(tok[k + 1] == '0' ? '~' : '/');
        ++k;
      } else {
        key.push_back(tok[k]);
      }
    }
    const bool is_index = cur->is_array() && !key.empty() &&
                          key.find_first_not_of("0123456789") == std::string::npos;
    if (cur->is_object() && cur->contains(key)) {
      cur = &(*cur)[key];
    } else if (is_index) {
      MASKD_ASSIGN_OR_RETURN(size_t index, ParseIndex(key));
      if (index >= cur->size()) {
        return Invalid(absl::StrCat("unknown $ref \"", Shown(ref), "\" at ", Where(ptr)));
      }
      cur = &(*cur)[index];
    } else {
      return Invalid(absl::StrCat("unknown $ref \"", Shown(ref), "\" at ", Where(ptr)));
    }
    out += "/" + PtrEscape(key);
    i = j;
  }
  *target_ptr = out;
  return cur;
}

const std::map<std::string, std::pair<std::string, const json*>>& Converter::Anchors() {
  if (!anchors_built_) {
    anchors_built_ = true;
    CollectAnchors(root_, "");
  }
  return anchors_;
}

void Converter::CollectAnchors(const json& s, const std::string& ptr) {
  if (s.is_object()) {
    for (const char* k : {"$anchor", "$dynamicAnchor"}) {
      auto it = s.find(k);
      if (it != s.end() && it->is_string()) anchors_.emplace(it->get<std::string>(), std::pair{ptr, &s});
    }
    for (const char* k : {"$id", "id"}) {
      auto it = s.find(k);
      if (it != s.end() && it->is_string()) {
        std::string id = it->get<std::string>();
        if (!id.empty() && id[0] == '#') anchors_.emplace(id.substr(1), std::pair{ptr, &s});
      }
    }
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() == "enum" || it.key() == "const" || it.key() == "examples" ||
          it.key() == "default")
        continue;
      CollectAnchors(it.value(), Child(ptr, it.key()));
    }
  } else if (s.is_array()) {
    for (size_t i = 0; i < s.size(); ++i) CollectAnchors(s[i], absl::StrCat(ptr, "/", i));
  }
}

std::string Converter::RootId() const {
  for (const char* k : {"$id", "id"}) {
    auto it = root_.find(k);
    if (root_.is_object() && it != root_.end() && it->is_string()) {
      std::string id = it->get<std::string>();
      if (auto h = id.find('#'); h != std::string::npos) id = id.substr(0, h);
      return id;
    }
  }
  return "";
}

absl::StatusOr<const json*> Converter::Resolve(const std::string& ref, const std::string& ptr,
                                               std::string* target_ptr) {
  size_t hash = ref.find('#');
  std::string base = hash == std::string::npos ? ref : ref.substr(0, hash);
  std::string fragment = hash == std::string::npos ? "" : ref.substr(hash + 1);
  if (!base.empty()) {
    std::string id = RootId();
    bool same = !id.empty() && (base == id || (id.size() > base.size() &&
                                               id.compare(id.size() - base.size(), base.size(),
                                                          base) == 0 &&
                                               id[id.size() - base.size() - 1] == '/'));
    if (!same) {
      return Invalid(absl::StrCat("unsupported $ref \"", Shown(ref), "\" at ", Where(ptr),
                                  ": only local references (#...) are resolved"));
    }
  }
  return ResolvePointer(fragment, ref, ptr, target_ptr);
}

absl::StatusOr<Re> Converter::ConvertRef(const std::string& ref, const std::string& ptr) {
  std::string tptr;
  MASKD_ASSIGN_OR_RETURN(const json* found, Resolve(ref, ptr, &tptr));
  const json& target = *found;
  if (rules_mode_) return RefRule(target, tptr);
  if (auto it = ref_cache_.find(tptr); it != ref_cache_.end()) return it->second;
  int& count = ref_stack_[tptr];
  if (count >= o_.max_recursion_depth) {
    ++cuts_;
    Warn("$ref", ptr,
         absl::StrCat("recursion into ", Where(tptr), " cut at depth ", o_.max_recursion_depth));
    return Re();
  }
  ++count;
  int before = cuts_;
  // On an error the count stays raised: ConvertEnum, the one caller that
  // goes on after an error, restores ref_stack_.
  MASKD_ASSIGN_OR_RETURN(Re r, Convert(target, tptr));
  --ref_stack_[tptr];
  if (cuts_ == before) ref_cache_[tptr] = r;
  return r;
}

}  // namespace maskd::json_schema_internal
