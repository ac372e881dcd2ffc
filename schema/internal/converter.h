// The JSON Schema converter: one conversion of one schema document into a
// regex (JsonSchemaToRegex) or regex rules (JsonSchemaToRules, "rules mode").
//
// Errors: every step that can fail returns absl::Status or absl::StatusOr
// (a regex step: absl::StatusOr<Re>, nullopt inside meaning "no instance",
// which is not an error) and its caller returns at once on an error: the
// first error ends the conversion, leaving the state where it stopped, as
// the exceptions this replaced did. A status rather than an error member
// that each step checks, so no step can run on after a failure. Only
// ConvertEnum goes on after an error (a sibling keyword it cannot convert
// leaves the values unchecked); it restores the warnings and $ref counts
// the failed attempt left.
// Internal to schema/; its members are defined one job per file:
//   converter.cc       the recursion over subschemas, types, shared helpers
//   ref_resolution.cc  $ref: JSON pointers, anchors, the recursion cut
//   rules_mode.cc      rule references, the any-value rule, rule expansion
//   normalize.cc       allOf merging, if/then/else and dependencies lowered
//   negate.cc          `not` as the complement schema
//   emit_enum.cc       enum/const values
//   instance_check.cc  finite value sets checked value by value against the schema
//   emit_number.cc     integers and numbers (bounds, multipleOf)
//   emit_string.cc     strings, excluded strings, `pattern`, `format` glue
//   emit_array.cc      arrays and `contains`
//   emit_object.cc     objects: properties, additional keys, counts
//   emit_any_value.cc  any JSON value (the regex route's bounded one)
#ifndef MASKD_SCHEMA_INTERNAL_CONVERTER_H_
#define MASKD_SCHEMA_INTERNAL_CONVERTER_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "automaton/dfa.h"
#include "schema/internal/json_schema_internal.h"
#include "schema/internal/keywords.h"
#include "schema/internal/status_macros.h"
#include "schema/json_schema.h"

namespace maskd::json_schema_internal {

// A regex, or nullopt for the empty language (no instance).
using Re = std::optional<std::string>;

// The alternation of `parts` (duplicates dropped, order kept); "" when empty:
// callers check emptiness through UnionRe.
std::string Union(const std::vector<std::string>& parts);
// As Union, nullopt when `parts` is empty.
Re UnionRe(const std::vector<std::string>& parts);

// Schema rewriting helpers (negate.cc).
// A schema of the given type (none: any) carrying a kUnsupportedKw marker.
json Marker(const char* type, const std::string& keyword, const std::string& ptr,
            const std::string& why);
// The union of `branches` as a schema: false when none is left, true when one
// is true or {}, the branch itself when alone, else {"anyOf": [...]}.
json AnyOfOrSingle(std::vector<json> branches);
// `not` whose content only restricts types: handled by ApplyNot.
bool IsTypeOnlyNot(const json& n);

// The regex of string formats (date, time, uuid, ...); "" for a format not
// enforced. formats.cc.
std::string FormatRegex(const std::string& format);

class Converter {
 public:
  // `root` and `o` outlive the converter. rules: the grammar route
  // (JsonSchemaToRules): $ref targets, the any value and large subschemas
  // become rules referenced as `(?&k)`.
  Converter(const json& root, const JsonSchemaOptions& o, bool rules = false);

  // The root's regex (rules mode: also rules_[0]).
  absl::StatusOr<std::string> Run();

  // Rules mode: rules_[0] is the root; each regex may reference rules as (?&k).
  std::vector<JsonSchemaRule> TakeRules() { return std::move(rules_); }
  bool truncated_recursion() const { return cuts_ > 0; }
  std::vector<std::string> warnings() const {
    return std::vector<std::string>(warnings_.begin(), warnings_.end());
  }

 private:
  // ---------- shared helpers (converter.cc)
  void Warn(const std::string& keyword, const std::string& ptr, const std::string& what);
  // InvalidArgument naming `keyword` at `ptr` (and why).
  static absl::Status Unsupported(const std::string& keyword, const std::string& ptr,
                                  const std::string& why = "");
  // Cancelled when the budget's cancel flag is set and, when `check_clock`,
  // DeadlineExceeded past its deadline.
  absl::Status CheckBudget(bool check_clock) const;
  // One unit of the conversion's work: a subschema converted (Convert) or a
  // value checked against one (Accepts). ResourceExhausted past kMaxSteps
  // (a schema whose work grows faster than its size, such as an instance
  // check whose candidates each meet every branch of a large anyOf); then
  // CheckBudget, its clock every 64 steps.
  absl::Status CountStep();
  static constexpr int64_t kMaxSteps = 2000000;
  // A DFA for `regex` under the budget, with at most `max_states` states (and
  // the budget's own caps); nullptr when it does not fit (a cap, or rules
  // that cannot be expanded): the caller falls back. An error when the
  // deadline or cancel flag trips.
  absl::StatusOr<std::shared_ptr<const Dfa>> BudgetedDfa(const std::string& regex,
                                                         uint32_t max_states) const;
  static bool IsBudgetError(const absl::Status& s);
  // ResourceExhausted when `r` is over max_regex_bytes.
  absl::Status CheckSize(const Re& r) const;
  // "\{" / "\}" with the layout's whitespace inside.
  std::string Open(char c) const;
  std::string Close(char c) const;
  // `unit` repeated min..max times (max absent: unbounded); a max above
  // max_counted_repeat is dropped (warning), a min above it an error.
  absl::StatusOr<std::string> Repeat(const std::string& unit, int64_t min, std::optional<int64_t> max,
                                     const std::string& keyword_ptr, const char* max_kw);
  // A non-negative count keyword (rounded up, capped at 1e15); nullopt when absent.
  static absl::StatusOr<std::optional<int64_t>> IntKw(const json& s, const char* k, const std::string& ptr);

  // ---------- the recursion (converter.cc)
  absl::StatusOr<Re> Convert(const json& s_in, const std::string& ptr);
  absl::StatusOr<Re> ConvertInner(const json& s_in, const std::string& ptr);
  // oneOf whose branches are distinct single types cannot overlap.
  bool DisjointBranches(const json& branches);
  absl::StatusOr<Re> ConvertPlain(const json& s, const std::string& ptr);
  std::set<std::string> InferTypes(const json& s) const;
  absl::Status ApplyNot(const json& n, const std::string& ptr, std::set<std::string>* types,
                        bool* non_integer);
  absl::StatusOr<Re> ConvertNonInteger(const json& s, const std::string& ptr);

  // ---------- $ref (ref_resolution.cc)
  // The schema `ref` (at `ptr`) names, and its pointer in *target_ptr.
  absl::StatusOr<const json*> ResolvePointer(const std::string& fragment, const std::string& ref,
                                             const std::string& ptr, std::string* target_ptr);
  const std::map<std::string, std::pair<std::string, const json*>>& Anchors();
  void CollectAnchors(const json& s, const std::string& ptr);
  std::string RootId() const;
  absl::StatusOr<const json*> Resolve(const std::string& ref, const std::string& ptr,
                                      std::string* target_ptr);
  absl::StatusOr<Re> ConvertRef(const std::string& ref, const std::string& ptr);

  // ---------- rules (rules_mode.cc)
  static std::string RuleRef(size_t k);
  // The rule `key` names in `rules_by_key`, made by `convert` the first time
  // (the $ref targets' and the merges' rules).
  absl::StatusOr<Re> KeyedRule(std::map<std::string, size_t>& rules_by_key, const std::string& key,
                               const std::string& ptr,
                               absl::FunctionRef<absl::StatusOr<Re>()> convert);
  // The rule for the $ref target at `tptr`, converted once.
  absl::StatusOr<Re> RefRule(const json& target, const std::string& tptr);
  absl::StatusOr<std::string> ExpandRules(const std::string& regex, int depth = 0) const;
  Re SplitLarge(Re r, const std::string& ptr);
  const std::string& AnyValueRule();
  // An object's members in any order (JsonSchemaOptions::any_property_order):
  // `kvs` the declared "key": value texts, `required` which must appear,
  // `extra` the other members' text (may be absent). Nullopt when the object
  // is past kMaxAnyOrderProperties (the caller keeps the schema order).
  std::optional<std::string> AnyOrderObject(const std::vector<std::string>& kvs,
                                            const std::vector<bool>& required, const Re& extra,
                                            const std::string& ptr);
  static constexpr size_t kMaxAnyOrderProperties = 8;

  // `parts` merged into one schema, in order (a $ref with siblings or an
  // allOf: the schema itself; an anyOf/oneOf branch: the rest of its schema,
  // then the branch), then converted. Rules mode: a merge that inlines a
  // $ref (its own or an allOf branch's: the only way a merge can lead back
  // to itself) is a rule, keyed by its parts' JSON text (their validation
  // keywords), so that recursion through it is a reference, as through a
  // bare $ref, and the same merge written in many places is one rule (the
  // regex route unrolls such recursion to the depth limit instead).
  // Each part comes with its pointer (for MergeInto's messages).
  absl::StatusOr<Re> ConvertMerged(
      std::initializer_list<std::pair<const json*, const std::string*>> parts,
      const std::string& ptr);

  // ---------- schema rewriting (normalize.cc, negate.cc)
  absl::Status MergeInto(json& acc, const json& s_in, const std::string& ptr, int depth);
  // Keyword `k` of a merged schema, with value `v`, merged into acc[k] (both
  // present): the value both allow; acc becomes false when none is left.
  absl::Status MergeKeyword(json& acc, const std::string& k, const json& v, const std::string& ptr);
  absl::StatusOr<json> Negate(const json& s_in, const std::string& ptr, int depth);
  void NegateEnum(const json& s, const std::string& ptr, std::vector<json>* out);
  // Negate keyword family by family (negate.cc): each appends to *out the
  // branches of the complement that its keywords of `s` (an object schema in
  // the numeric bounds form) contribute; `depth` is Negate's.
  absl::Status NegateObject(const json& s, const std::string& ptr, int depth, std::vector<json>* out);
  absl::Status NegateDependencies(const json& s, const std::string& ptr, int depth,
                                  std::vector<json>* out);
  absl::Status NegateArray(const json& s, const std::string& ptr, int depth, std::vector<json>* out);
  absl::Status NegateItems(const json& s, const std::string& ptr, int depth, std::vector<json>* out);
  absl::Status NegateString(const json& s, const std::string& ptr, std::vector<json>* out);
  absl::Status NegateApplicators(const json& s, const std::string& ptr, int depth,
                                 std::vector<json>* out);
  absl::StatusOr<json> Conditional(const json& s, const std::string& ptr);
  json Dependency(const std::string& a, const json& dep, const json& s);
  absl::Status LowerConditionals(json& s, const std::string& ptr, json* parts);
  absl::StatusOr<std::optional<json>> Lower(const json& s, const std::string& ptr);

  // ---------- enum / const (emit_enum.cc)
  absl::StatusOr<Re> ConvertEnum(const json& s, const std::string& ptr,
                                 const std::set<std::string>& types, bool non_integer);
  bool EnumValueMatches(const Dfa& dfa, const json& v) const;
  std::string ConstText(const json& v) const;
  std::string ConstRegex(const json& v);

  // ---------- enum/const against the whole schema (instance_check.cc)
  // The values a schema's instances are among (its enum or const, an allOf
  // branch's, a $ref target's, or the union of every anyOf/oneOf branch's);
  // nullopt when none is finite (or past 4,096 values).
  std::optional<std::vector<json>> FiniteCandidates(const json& s, const std::string& ptr, int depth);
  // The regex of the candidates `s` accepts (nullopt inside: none), or
  // nullopt when `s` has no finite candidates or a keyword the instance check
  // does not decide (unevaluatedProperties, a pattern past the DFA budget):
  // the caller converts keyword by keyword.
  absl::StatusOr<std::optional<Re>> ConvertFinite(const json& s, const std::string& ptr);
  // Whether `v` is an instance of `s`, with the specification's semantics (no
  // type inference; formats maskd enforces are checked). Unimplemented for a
  // keyword this check does not decide; budget errors as the conversion's.
  // `shallow`: only `s`'s own keywords that do not recurse (type, const,
  // enum, numbers' and strings'; no applicator, no array or object keyword):
  // a false is then final, a true says nothing.
  absl::StatusOr<bool> Accepts(const json& s, const std::string& ptr, const json& v, int depth,
                               bool shallow = false);
  // Accepts keyword family by family, for `s` an object schema in the
  // numeric bounds form (NormalizeBounds): whether `v` passes the family's
  // keywords, with Accepts' errors. Accepts asks them in this order after the
  // type/const/enum family; the first false or error decides.
  absl::StatusOr<bool> AcceptsApplicators(const json& s, const std::string& ptr, const json& v,
                                          int depth);
  absl::StatusOr<bool> AcceptsString(const json& s, const std::string& ptr, const std::string& text);
  absl::StatusOr<bool> AcceptsArray(const json& s, const std::string& ptr, const json& v, int depth);
  absl::StatusOr<bool> AcceptsObject(const json& s, const std::string& ptr, const json& v, int depth);
  // properties, patternProperties, additionalProperties, propertyNames: each
  // member of object `v` against the schemas its key selects.
  absl::StatusOr<bool> AcceptsMembers(const json& s, const std::string& ptr, const json& v,
                                      int depth);
  // A count keyword as the conversion reads it (IntKw); Unimplemented when
  // malformed, leaving the conversion to report it.
  static absl::StatusOr<std::optional<int64_t>> CheckedCount(const json& s, const char* k,
                                                             const std::string& ptr);
  // Whether the ECMA `pattern` matches somewhere in `text` / the content
  // regex (JSON-encoded string content) matches `text` whole.
  absl::StatusOr<bool> PatternAccepts(const std::string& pattern, const std::string& ptr,
                                      const std::string& text);
  absl::StatusOr<bool> ContentAccepts(const std::string& content_regex, const std::string& ptr,
                                      const std::string& text);

  // ---------- any value (emit_any_value.cc)
  std::string StringAny() const;
  const std::string& AnyValue(int depth);
  const std::string& AnyValueRegex(int depth) const;
  // The scalar alternatives of any value, and any value whose array items
  // and object values are `v` (both routes' any value, at one level).
  std::string AnyScalar() const;
  std::string AnyValueAround(const std::string& v) const;

  // ---------- numbers (emit_number.cc)
  absl::StatusOr<Re> ConvertInteger(const json& s, const std::string& ptr);
  absl::StatusOr<Re> IntegerMultiple(const json& mv, const std::optional<BigInt>& lo,
                                     const std::optional<BigInt>& hi, const std::string& ptr);
  absl::StatusOr<Re> ConvertNumber(const json& s, const std::string& ptr);

  // ---------- strings (emit_string.cc)
  absl::StatusOr<Re> ConvertString(const json& s, const std::string& ptr);
  absl::StatusOr<Re> ConvertExcludedStrings(const json& s, const json& excluded,
                                            const std::string& ptr);
  absl::StatusOr<std::string> PatternRegex(const std::string& pattern, const std::string& ptr,
                                           const char* keyword);

  // ---------- arrays (emit_array.cc)
  absl::StatusOr<Re> ConvertContains(const json& s, const std::string& ptr);
  absl::StatusOr<Re> ConvertArray(const json& s, const std::string& ptr);

  // ---------- objects (emit_object.cc)
  std::string KeyRegex(const std::string& key) const;
  std::string OtherKeyRegex(const std::vector<std::string>& known);
  absl::StatusOr<Re> ConvertObject(const json& s, const std::string& ptr);
  struct ObjectMember {
    std::string kv;  // "key": value
    bool required;
  };
  // An object schema's members, as ConvertObject's steps lay them out.
  struct ObjectMembers {
    std::vector<ObjectMember> members;     // properties in order, then the undeclared required
    std::vector<std::string> known;        // the properties' names
    std::vector<std::string> undeclared;   // required names not in properties, in order
    const json* additional = nullptr;      // additionalProperties (else unevaluatedProperties)
    Re additional_value;                   // the other keys' value; nullopt: no other key
    std::vector<std::string> extra_kvs;    // patternProperties' and the other keys' members
  };
  // The properties as members, and the undeclared required names; false
  // when a required property has no instance (nor has the object).
  absl::StatusOr<bool> DeclaredMembers(const json& s, const std::string& ptr, ObjectMembers* m);
  // The other keys' value: additionalProperties, or by default any value.
  absl::Status AdditionalValue(const json& s, const std::string& ptr, ObjectMembers* m);
  // The members beside the declared ones: patternProperties', and the other
  // keys' (their names from propertyNames, else any name not declared).
  absl::Status ExtraMembers(const json& s, const std::string& ptr, ObjectMembers* m);
  // The undeclared required names as members valued by the other keys'
  // value; false when additionalProperties forbids them.
  bool UndeclaredMembers(ObjectMembers* m);
  // How many members an object may have. Counts run 0..cap; without max,
  // cap stands for "cap or more".
  struct MemberCounts {
    int64_t min = 0;             // 0 when the required members reach minProperties
    std::optional<int64_t> max;  // maxProperties, when it binds
    int64_t cap = 1;
  };
  // `members` in order, each optional unless required, then `extra` members
  // repeated, with min/maxProperties counted.
  absl::StatusOr<Re> CountedObject(const json& s, const std::string& ptr,
                                   const std::vector<ObjectMember>& members, const Re& extra);
  // [c]: the member lists (without braces) holding c members (saturated at
  // cap when unbounded); nullopt where none.
  absl::StatusOr<std::vector<Re>> MembersByCount(const std::vector<ObjectMember>& members,
                                                 const MemberCounts& counts);
  // MembersByCount's lists followed by `extra` members, by total count.
  absl::StatusOr<std::vector<Re>> WithExtraMembers(const std::vector<Re>& by_count, const Re& extra,
                                                   const MemberCounts& counts,
                                                   const std::string& ptr);
  // The object of any list with at least `min` members; nullopt when none.
  Re ObjectOfCounts(const std::vector<Re>& bodies_by_count, int64_t min) const;

  // A regex matching no string: a rule whose target has no instance.
  static constexpr char kNoString[] = "[^\\x00-\\x{10FFFF}]";
  // Rules mode: a subschema regex above this many bytes becomes its own rule.
  static constexpr size_t kRuleSplitBytes = 512;
  // The search automaton of an unanchored pattern above this is anchored.
  static constexpr uint32_t kMaxUnanchoredPatternStates = 4000;

  struct PatternInfo {
    std::string regex;
    bool anchored_instead;
  };
  std::map<std::string, PatternInfo> pattern_cache_;
  std::map<std::string, std::shared_ptr<const Dfa>> check_dfa_cache_;  // content regex -> DFA
  // pattern -> its content regex (PatternToJsonStringRegex), nullopt where
  // that fails: an instance check asks the same pattern once per candidate.
  std::map<std::string, std::optional<std::string>> pattern_regex_cache_;
  const json& root_;
  const JsonSchemaOptions& o_;
  std::string ws_, item_sep_, key_sep_;
  std::set<std::string> warnings_;
  std::map<std::string, int> ref_stack_;  // $ref target -> expansions on this path
  std::map<std::string, Re> ref_cache_;   // $ref target -> regex (when nothing was cut)
  mutable std::map<int, std::string> any_cache_;  // depth -> any-value regex
  std::map<std::string, std::pair<std::string, const json*>> anchors_;  // name -> (ptr, schema)
  bool anchors_built_ = false;
  const bool rules_mode_;
  std::vector<JsonSchemaRule> rules_;
  std::map<std::string, size_t> rule_of_ptr_;   // $ref target pointer -> rule
  std::map<std::string, size_t> rule_of_text_;  // split-off regex -> rule
  std::map<std::string, size_t> rule_of_merge_;  // recursive merge's JSON text -> rule
  std::set<size_t> empty_rules_;                // $ref targets without instances
  std::set<size_t> in_progress_;                // $ref targets being converted
  std::string any_rule_;                        // "(?&k)" once made
  int cuts_ = 0;                                // recursions cut at max_recursion_depth
  std::string cut_required_;  // the first required property lost to a cut
  int64_t steps_ = 0;         // CountStep calls, for the work limit
  int depth_ = 0;             // Convert calls open now
};

}  // namespace maskd::json_schema_internal

#endif  // MASKD_SCHEMA_INTERNAL_CONVERTER_H_
