// Objects: properties in order, required, additional and pattern properties,
// propertyNames, min/maxProperties counted.
// See schema/internal/converter.h.
#include "schema/internal/converter.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "automaton/regex_text.h"
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

// Three regexes over JSON string content, each read from trie node `n`:
//   Prefixes(n): a path down from n, the empty one included;
//   Departures(n): a path down from n, then one raw character that starts
//     none of the reached node's children;
//   NonWords(n): a path down from n to a node that ends no word (nullopt:
//     there is none).
// The content that is none of the words is NonWords(root), or Prefixes(root)
// then an escape, or Departures(root), the last two followed by any content
// (an escape counts as leaving the trie: see docs/json-schema.md). That
// content is written once, so the regex grows with the trie alone: a
// character of a word costs a few bytes and no DFA states beyond its node.
std::string Prefixes(const TrieNode& n) {
  if (n.kids.empty()) return "";
  std::vector<std::string> alts;
  for (auto& [c, kid] : n.kids) alts.push_back(RegexEscape(c) + Prefixes(kid));
  return "(?:" + absl::StrJoin(alts, "|") + ")?";
}

std::string Departures(const TrieNode& n) {
  std::string exclude;
  for (auto& [c, _] : n.kids) exclude += RegexClassEscape(c);
  std::vector<std::string> alts = {absl::StrCat("[^\"\\\\\\x00-\\x1f", exclude, "]")};
  for (auto& [c, kid] : n.kids) alts.push_back(RegexEscape(c) + Departures(kid));
  if (alts.size() == 1) return alts[0];
  return "(?:" + absl::StrJoin(alts, "|") + ")";
}

std::optional<std::string> NonWords(const TrieNode& n) {
  std::vector<std::string> alts;
  for (auto& [c, kid] : n.kids) {
    if (std::optional<std::string> rest = NonWords(kid)) alts.push_back(RegexEscape(c) + *rest);
  }
  if (alts.empty()) return n.terminal ? std::nullopt : std::optional<std::string>("");
  std::string r = "(?:" + absl::StrJoin(alts, "|") + ")";
  if (!n.terminal) r += "?";
  return r;
}

// JSON string content that is none of the words of the trie at `root`.
std::string Complement(const TrieNode& root) {
  std::string r = absl::StrCat("(?:", Prefixes(root), JsonEscapeRegex(), "|", Departures(root), ")",
                               JsonCharRegex(), "*");
  std::optional<std::string> non_words = NonWords(root);
  if (!non_words) return r;
  if (non_words->empty()) return "(?:" + r + ")?";
  return "(?:" + r + "|" + *non_words + ")";
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

namespace {

// dst | part (dst absent: part).
void AddAlternative(Re& dst, const std::string& part) {
  if (!dst) dst = part;
  else dst = "(?:" + *dst + "|" + part + ")";
}

}  // namespace

absl::StatusOr<Re> Converter::ConvertObject(const json& s, const std::string& ptr) {
  ObjectMembers m;
  MASKD_ASSIGN_OR_RETURN(bool has_instance, DeclaredMembers(s, ptr, &m));
  if (!has_instance) return Re();
  MASKD_RETURN_IF_ERROR(AdditionalValue(s, ptr, &m));
  MASKD_RETURN_IF_ERROR(ExtraMembers(s, ptr, &m));
  if (!UndeclaredMembers(&m)) return Re();
  Re extra = m.extra_kvs.empty() ? Re() : Re(Union(m.extra_kvs));
  if (o_.any_property_order && rules_mode_) {
    if (s.contains("minProperties") || s.contains("maxProperties")) {
      Warn("any_property_order", ptr, "minProperties/maxProperties: members in schema order");
    } else {
      std::vector<std::string> kvs;
      std::vector<bool> req;
      for (const ObjectMember& it : m.members) {
        kvs.push_back(it.kv);
        req.push_back(it.required);
      }
      if (std::optional<std::string> any = AnyOrderObject(kvs, req, extra, ptr)) return Re(*any);
      Warn("any_property_order", ptr,
           absl::StrCat("more than ", kMaxAnyOrderProperties, " properties: members in schema order"));
    }
  }
  return CountedObject(s, ptr, m.members, extra);
}

absl::StatusOr<bool> Converter::DeclaredMembers(const json& s, const std::string& ptr,
                                                ObjectMembers* m) {
  std::set<std::string> required;
  std::vector<std::string> required_order;
  if (auto r = s.find("required"); r != s.end() && r->is_array()) {
    for (auto& x : *r) {
      if (x.is_string() && required.insert(x.get<std::string>()).second)
        required_order.push_back(x.get<std::string>());
    }
  }
  if (auto p = s.find("properties"); p != s.end()) {
    if (!p->is_object()) {
      return Invalid(absl::StrCat("properties at ", Where(ptr), " is not an object"));
    }
    for (auto it = p->begin(); it != p->end(); ++it) {
      m->known.push_back(it.key());
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
          return false;
        }
        continue;
      }
      m->members.push_back({KeyRegex(it.key()) + key_sep_ + *v, req});
    }
  }
  for (auto& r : required_order) {
    if (std::find(m->known.begin(), m->known.end(), r) == m->known.end()) m->undeclared.push_back(r);
  }
  return true;
}

absl::Status Converter::AdditionalValue(const json& s, const std::string& ptr, ObjectMembers* m) {
  std::string addl_ptr = Child(ptr, "additionalProperties");
  if (auto a = s.find("additionalProperties"); a != s.end()) {
    m->additional = &*a;
  } else if (auto u = s.find("unevaluatedProperties"); u != s.end()) {
    m->additional = &*u;
    addl_ptr = Child(ptr, "unevaluatedProperties");
  }
  if (!m->additional) {
    // A schema that declares nothing ("type": "object" alone) is a free-form
    // object whatever the default.
    bool declares = s.contains("properties") || s.contains("patternProperties");
    if (o_.additional_properties_default_open || !declares) {
      m->additional_value = AnyValue(o_.any_value_depth);
    }
    return absl::OkStatus();
  }
  MASKD_ASSIGN_OR_RETURN(m->additional_value, Convert(*m->additional, addl_ptr));
  return absl::OkStatus();
}

absl::Status Converter::ExtraMembers(const json& s, const std::string& ptr, ObjectMembers* m) {
  if (auto pp = s.find("patternProperties"); pp != s.end() && pp->is_object()) {
    for (auto it = pp->begin(); it != pp->end(); ++it) {
      std::string pptr = Child(Child(ptr, "patternProperties"), it.key());
      MASKD_ASSIGN_OR_RETURN(std::string key, PatternRegex(it.key(), pptr, "patternProperties"));
      MASKD_ASSIGN_OR_RETURN(Re v, Convert(it.value(), pptr));
      if (v) m->extra_kvs.push_back("\"" + key + "\"" + key_sep_ + *v);
    }
    if (m->additional_value && !pp->empty()) {
      Warn("patternProperties", ptr,
           "keys matching a pattern may also take the additionalProperties value");
    }
  }
  if (!m->additional_value) return absl::OkStatus();
  // The other keys: propertyNames' strings, else any key but the named ones.
  std::string key;
  if (auto pn = s.find("propertyNames"); pn != s.end()) {
    json t = json::object();
    MASKD_RETURN_IF_ERROR(MergeInto(t, *pn, Child(ptr, "propertyNames"), 0));
    if (!t.is_boolean()) t["type"] = "string";
    MASKD_ASSIGN_OR_RETURN(Re k, Convert(t, Child(ptr, "propertyNames")));
    if (!k) m->additional_value.reset();
    else key = *k;
  } else {
    std::vector<std::string> all_keys = m->known;
    all_keys.insert(all_keys.end(), m->undeclared.begin(), m->undeclared.end());
    key = OtherKeyRegex(all_keys);
  }
  if (m->additional_value) m->extra_kvs.push_back(key + key_sep_ + *m->additional_value);
  return absl::OkStatus();
}

bool Converter::UndeclaredMembers(ObjectMembers* m) {
  for (auto& r : m->undeclared) {
    if (!m->additional_value) {
      if (m->additional) return false;  // additionalProperties: false
      m->members.push_back({KeyRegex(r) + key_sep_ + AnyValue(o_.any_value_depth), true});
      continue;
    }
    m->members.push_back({KeyRegex(r) + key_sep_ + *m->additional_value, true});
  }
  return true;
}

absl::StatusOr<Re> Converter::CountedObject(const json& s, const std::string& ptr,
                                            const std::vector<ObjectMember>& members,
                                            const Re& extra) {
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> min_properties, IntKw(s, "minProperties", ptr));
  MASKD_ASSIGN_OR_RETURN(std::optional<int64_t> max_p, IntKw(s, "maxProperties", ptr));
  MemberCounts counts;
  counts.min = min_properties.value_or(0);
  int64_t n_req = 0;
  for (auto& it : members) n_req += it.required;
  if (counts.min <= n_req) counts.min = 0;
  if (max_p && !extra && *max_p >= static_cast<int64_t>(members.size())) max_p.reset();
  if (max_p && *max_p < n_req) return Re();
  counts.max = max_p;
  counts.cap = max_p ? *max_p : std::max<int64_t>(counts.min, 1);
  if (counts.cap > 64) {
    return Unsupported(max_p ? "maxProperties" : "minProperties", ptr, "bound above 64");
  }
  MASKD_ASSIGN_OR_RETURN(std::vector<Re> q, MembersByCount(members, counts));
  MASKD_ASSIGN_OR_RETURN(std::vector<Re> fin, WithExtraMembers(q, extra, counts, ptr));
  return ObjectOfCounts(fin, counts.min);
}

absl::StatusOr<std::vector<Re>> Converter::MembersByCount(const std::vector<ObjectMember>& members,
                                                          const MemberCounts& counts) {
  const int64_t cap = counts.cap;
  std::vector<Re> q(cap + 1);
  q[0] = "";
  for (auto& it : members) {
    std::vector<Re> nq(cap + 1);
    for (int64_t c = 0; c <= cap; ++c) {
      if (!q[c]) continue;
      int64_t nc = c + 1;
      bool sat = !counts.max && nc > cap;
      if (sat) nc = cap;
      if (nc > cap) {  // over maxProperties: only skipping is possible
        if (!it.required) AddAlternative(nq[c], *q[c]);
        continue;
      }
      std::string with = *q[c] + (c == 0 ? "" : item_sep_) + it.kv;
      if (nc == c) {  // saturated: one copy of q[c]
        if (it.required) AddAlternative(nq[c], with);
        else AddAlternative(nq[c], *q[c] + "(?:" + item_sep_ + it.kv + ")?");
      } else {
        AddAlternative(nq[nc], with);
        if (!it.required) AddAlternative(nq[c], *q[c]);
      }
    }
    q = std::move(nq);
    for (auto& x : q) MASKD_RETURN_IF_ERROR(CheckSize(x));
  }
  return q;
}

absl::StatusOr<std::vector<Re>> Converter::WithExtraMembers(const std::vector<Re>& by_count,
                                                            const Re& extra,
                                                            const MemberCounts& counts,
                                                            const std::string& ptr) {
  const int64_t cap = counts.cap;
  std::vector<Re> fin(cap + 1);
  const std::string rep = extra ? "(?:" + item_sep_ + *extra + ")" : "";
  for (int64_t c = 0; c <= cap; ++c) {
    if (!by_count[c]) continue;
    if (extra && !counts.max && c == cap && c > 0) {
      AddAlternative(fin[c], *by_count[c] + rep + "*");
    } else {
      AddAlternative(fin[c], *by_count[c]);
    }
    if (!extra) continue;
    for (int64_t t = c + 1; t <= cap; ++t) {
      bool last_open = !counts.max && t == cap;
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
        more = *by_count[c] + reps;
      }
      AddAlternative(fin[t], more);
    }
  }
  return fin;
}

Re Converter::ObjectOfCounts(const std::vector<Re>& bodies_by_count, int64_t min) const {
  std::vector<std::string> bodies;
  bool empty_ok = false;
  for (int64_t c = 0; c < static_cast<int64_t>(bodies_by_count.size()); ++c) {
    if (!bodies_by_count[c] || c < min) continue;
    if (c == 0) {
      empty_ok = true;
      continue;
    }
    bodies.push_back(*bodies_by_count[c]);
  }
  std::string empty = Open('{') + Close('}').substr(ws_.size());
  if (bodies.empty()) return empty_ok ? Re(empty) : Re();
  std::string body = bodies.size() == 1 ? bodies[0] : "(?:" + absl::StrJoin(bodies, "|") + ")";
  std::string full = Open('{') + body + Close('}');
  if (empty_ok) return "(?:" + empty + "|" + full + ")";
  return full;
}

}  // namespace maskd::json_schema_internal
