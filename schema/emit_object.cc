// Objects: properties in order, required, additional and pattern properties,
// propertyNames, min/maxProperties counted.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schema/internal/messages.h"

namespace maskd::json_schema_internal {

std::string Converter::KeyRegex(const std::string& key) const {
  return RegexEscape(PythonJsonString(key, o_.ensure_ascii));
}

namespace {

// A trie of words by character: each edge is one whole UTF-8 character, so
// the regex built from it never splits a multi-byte character.
struct TrieNode {
  std::map<std::string, TrieNode> kids;
  bool terminal = false;
};

// JSON string content that is not one of `node`'s words.
std::string Complement(const TrieNode& node) {
  std::string exclude;
  for (auto& [c, _] : node.kids) {
    if (c == "\\" || c == "]" || c == "[" || c == "^" || c == "-") exclude += '\\';
    exclude += c;
  }
  std::vector<std::string> alts;
  alts.push_back(absl::StrCat("(?:[^\"\\\\\\x00-\\x1f", exclude,
                              "]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})", JsonCharRegex(), "*"));
  for (auto& [c, kid] : node.kids) {
    alts.push_back(RegexEscape(c) + Complement(kid));
  }
  std::string r = "(?:" + absl::StrJoin(alts, "|") + ")";
  if (!node.terminal) r += "?";
  return r;
}

}  // namespace

std::string Converter::OtherKeyRegex(const std::vector<std::string>& known) {
  if (known.empty()) return StringAny();
  TrieNode root;
  for (auto& k : known) {
    std::string enc = PythonJsonString(k, o_.ensure_ascii);
    enc = enc.substr(1, enc.size() - 2);
    if (enc.find('\\') != std::string::npos) continue;  // not excluded (see docs)
    TrieNode* n = &root;
    for (size_t i = 0; i < enc.size();) {
      // enc is well-formed UTF-8 (from a parsed JSON string).
      const uint8_t lead = static_cast<uint8_t>(enc[i]);
      const size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
      n = &n->kids[enc.substr(i, len)];
      i += len;
    }
    n->terminal = true;
  }
  return "\"" + Complement(root) + "\"";
}

absl::StatusOr<Re> Converter::ConvertObject(const json& s, const std::string& ptr) {
  struct Item {
    std::string kv;
    bool required;
  };
  std::vector<Item> items;
  std::set<std::string> required;
  std::vector<std::string> required_order;
  if (auto r = s.find("required"); r != s.end() && r->is_array()) {
    for (auto& x : *r) {
      if (x.is_string() && required.insert(x.get<std::string>()).second)
        required_order.push_back(x.get<std::string>());
    }
  }
  std::vector<std::string> known;
  if (auto p = s.find("properties"); p != s.end()) {
    if (!p->is_object()) {
      return Invalid(absl::StrCat("properties at ", Where(ptr), " is not an object"));
    }
    for (auto it = p->begin(); it != p->end(); ++it) {
      known.push_back(it.key());
      std::string pptr = Child(Child(ptr, "properties"), it.key());
      int cuts_before = cuts_;
      MASKD_ASSIGN_OR_RETURN(Re v, Convert(it.value(), pptr));
      bool req = required.count(it.key()) > 0;
      if (!v) {
        if (req) {
          if (cuts_ != cuts_before && cut_required_.empty()) {
            cut_required_ = absl::StrCat("required property \"", Shown(it.key()), "\" at ", Where(pptr),
                                         " recurses past the limit");
          }
          return Re();
        }
        continue;
      }
      items.push_back({KeyRegex(it.key()) + key_sep_ + *v, req});
    }
  }
  std::vector<std::string> undeclared;
  for (auto& r : required_order) {
    if (std::find(known.begin(), known.end(), r) == known.end()) undeclared.push_back(r);
  }
  std::vector<std::string> all_keys = known;
  all_keys.insert(all_keys.end(), undeclared.begin(), undeclared.end());
  // Additional properties.
  const json* addl = nullptr;
  std::string addl_ptr = Child(ptr, "additionalProperties");
  if (auto a = s.find("additionalProperties"); a != s.end()) {
    addl = &*a;
  } else if (auto u = s.find("unevaluatedProperties"); u != s.end()) {
    addl = &*u;
    addl_ptr = Child(ptr, "unevaluatedProperties");
  }
  Re addl_value;
  if (!addl) {
    // A schema that declares nothing ("type": "object" alone) is a free-form
    // object whatever the default.
    bool declares = s.contains("properties") || s.contains("patternProperties");
    if (o_.additional_properties_default_open || !declares) {
      addl_value = AnyValue(o_.any_value_depth);
    }
  } else {
    MASKD_ASSIGN_OR_RETURN(addl_value, Convert(*addl, addl_ptr));
  }
  std::vector<std::string> extra_kvs;
  if (auto pp = s.find("patternProperties"); pp != s.end() && pp->is_object()) {
    for (auto it = pp->begin(); it != pp->end(); ++it) {
      std::string pptr = Child(Child(ptr, "patternProperties"), it.key());
      MASKD_ASSIGN_OR_RETURN(std::string key, PatternRegex(it.key(), pptr, "patternProperties"));
      MASKD_ASSIGN_OR_RETURN(Re v, Convert(it.value(), pptr));
      if (v) extra_kvs.push_back("\"" + key + "\"" + key_sep_ + *v);
    }
    if (addl_value && !pp->empty()) {
      Warn("patternProperties", ptr,
           "keys matching a pattern may also take the additionalProperties value");
    }
  }
  if (addl_value) {
    std::string key;
    if (auto pn = s.find("propertyNames"); pn != s.end()) {
      json t = json::object();
      MASKD_RETURN_IF_ERROR(MergeInto(t, *pn, Child(ptr, "propertyNames"), 0));
      if (!t.is_boolean()) t["type"] = "string";
      MASKD_ASSIGN_OR_RETURN(Re k, Convert(t, Child(ptr, "propertyNames")));
      if (!k) addl_value.reset();
      else key = *k;
    } else {
      key = OtherKeyRegex(all_keys);
    }
    if (addl_value) extra_kvs.push_back(key + key_sep_ + *addl_value);
  }
  // Required properties not declared: values from additionalProperties.
  for (auto& r : undeclared) {
    if (!addl_value) {
      if (addl) return Re();  // additionalProperties: false
      items.push_back({KeyRegex(r) + key_sep_ + AnyValue(o_.any_value_depth), true});
      continue;
    }
    items.push_back({KeyRegex(r) + key_sep_ + *addl_value, true});
  }
  Re extra = extra_kvs.empty() ? Re() : Re(Union(extra_kvs));
  if (o_.any_property_order && rules_mode_) {
    if (s.contains("minProperties") || s.contains("maxProperties")) {
      Warn("any_property_order", ptr, "minProperties/maxProperties: members in schema order");
    } else {
      std::vector<std::string> kvs;
      std::vector<bool> req;
      for (const Item& it : items) {
        kvs.push_back(it.kv);
        req.push_back(it.required);
      }
      if (std::optional<std::string> any = AnyOrderObject(kvs, req, extra, ptr)) return Re(*any);
      Warn("any_property_order", ptr,
           absl::StrCat("more than ", kMaxAnyOrderProperties, " properties: members in schema order"));
    }
  }

  // Counting: state c = properties so far, saturated at cap.
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_properties, IntKw(s, "minProperties", ptr));
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max_p, IntKw(s, "maxProperties", ptr));
  int64_t min_p = min_properties.value_or(0);
  int64_t n_req = 0;
  for (auto& it : items) n_req += it.required;
  if (min_p <= n_req) min_p = 0;
  if (max_p && !extra && *max_p >= static_cast<int64_t>(items.size())) max_p.reset();
  if (max_p && *max_p < n_req) return Re();
  int64_t cap = max_p ? *max_p : std::max<int64_t>(min_p, 1);
  if (cap > 64) {
    return Unsupported(max_p ? "maxProperties" : "minProperties", ptr, "bound above 64");
  }
  std::vector<Re> q(cap + 1);
  q[0] = "";
  auto add = [&](Re& dst, const std::string& part) {
    if (!dst) dst = part;
    else dst = "(?:" + *dst + "|" + part + ")";
  };
  for (auto& it : items) {
    std::vector<Re> nq(cap + 1);
    for (int64_t c = 0; c <= cap; ++c) {
      if (!q[c]) continue;
      int64_t nc = c + 1;
      bool sat = !max_p && nc > cap;
      if (sat) nc = cap;
      if (nc > cap) {  // over maxProperties: only skipping is possible
        if (!it.required) add(nq[c], *q[c]);
        continue;
      }
      std::string with = *q[c] + (c == 0 ? "" : item_sep_) + it.kv;
      if (nc == c) {  // saturated: one copy of q[c]
        if (it.required) add(nq[c], with);
        else add(nq[c], *q[c] + "(?:" + item_sep_ + it.kv + ")?");
      } else {
        add(nq[nc], with);
        if (!it.required) add(nq[c], *q[c]);
      }
    }
    q = std::move(nq);
    for (auto& x : q) MASKD_RETURN_IF_ERROR(CheckSize(x));
  }
  // Additional properties after the declared ones.
  std::vector<Re> fin(cap + 1);
  const std::string rep = extra ? "(?:" + item_sep_ + *extra + ")" : "";
  for (int64_t c = 0; c <= cap; ++c) {
    if (!q[c]) continue;
    if (extra && !max_p && c == cap && c > 0) {
      add(fin[c], *q[c] + rep + "*");
    } else {
      add(fin[c], *q[c]);
    }
    if (!extra) continue;
    for (int64_t t = c + 1; t <= cap; ++t) {
      bool last_open = !max_p && t == cap;
      int64_t j = t - c;
      std::optional<int64_t> jmax;
      std::string more;
      if (c == 0) {
        if (!last_open) jmax = j - 1;
        MASKD_ASSIGN_OR_RETURN(std::string reps, Repeat(rep, j - 1, jmax, ptr, "maxProperties"));
        more = *extra + reps;
      } else {
        if (!last_open) jmax = j;
        MASKD_ASSIGN_OR_RETURN(std::string reps, Repeat(rep, j, jmax, ptr, "maxProperties"));
        more = *q[c] + reps;
      }
      add(fin[t], more);
    }
  }
  std::vector<std::string> bodies;
  bool empty_ok = false;
  for (int64_t c = 0; c <= cap; ++c) {
    if (!fin[c] || c < min_p) continue;
    if (c == 0) {
      empty_ok = true;
      continue;
    }
    bodies.push_back(*fin[c]);
  }
  std::string empty = Open('{') + Close('}').substr(ws_.size());
  if (bodies.empty()) return empty_ok ? Re(empty) : Re();
  std::string body = bodies.size() == 1 ? bodies[0] : "(?:" + absl::StrJoin(bodies, "|") + ")";
  std::string full = Open('{') + body + Close('}');
  if (empty_ok) return "(?:" + empty + "|" + full + ")";
  return full;
}

}  // namespace maskd::json_schema_internal
