// maskctl maskbench --tokenizer T FILE.jsonl [FILE.jsonl ...] (a FILE "-": standard input)
//
// Runs MaskBench-style files (one {"schema", "tests": [{"valid", "text"}]}
// object per line) through the whole engine: ConstraintCompiler (JSON Schema
// -> regex -> DFA -> token index) -> Guide. An instance is accepted when its text can be walked
// token by token (at each step the longest allowed token that is a prefix of
// what remains) and EOS is allowed at the end. A schema passes when it
// compiles, every valid instance is accepted and every invalid one rejected.
//
// Output: one JSON line per file, then one for all files ("file": "all"):
//   {"file", "schemas", "compiled", "passing", "valid", "valid_accepted",
//    "invalid", "invalid_rejected", "ttfm_p50_us", "ttfm_p99_us",
//    "ttfm_max_us", "tbm_p50_us", "tbm_avg_us", "tbm_p99_us"}
// TTFM: schema text to the first mask (convert + compile + first mask).
// TBM: one mask written plus one token advanced, per token of valid instances.
// --timeout-s N: each schema's deadline for ConstraintCompiler (conversion
// and compilation), 10 s by default; past it the schema fails to compile.
// --verbose: one line per failure on stderr, then the top failure reasons.
// --no-share-loops: every state's first mask walks the whole token trie (the
// baseline for the loop-mask figures in docs/benchmarks.md).
// --fresh: the tokenizer's loop memo (tokenizer/loop_masks.h) is emptied before
// each schema, so every schema pays what it would in a new process (TTFM and
// TBM then include every first visit); --verbose prints the memo's counters.
// --cpu-time: TTFM and TBM in process CPU time instead of wall time.
// --require-text: a test without a string "text" is an error (exit 2, naming
// the file, line and test) instead of being walked as the empty string.
// --stages: each line also gets "stages", where the regex route's time goes
// (schemas on the grammar route are not counted): TTFM split into the JSON
// Schema conversion (timed again after the first mask, so TTFM is as without
// the flag; the second run is warm, so it is a slight underestimate), the
// rest of the compile (DFA and index) and the first mask, as medians and as
// shares of the summed TTFM; TBM split into first visits (the step's state
// not seen before in this schema: its mask is computed) and revisits.
// --slowest N: after the totals, the N schemas of the longest TTFM on stderr
// ("slowest: TTFM ms ROUTE FILE NAME", NAME the line's "file" or "line N"), for finding a tail's causes.
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "automaton/dfa.h"
#include "constraint/constraint_compiler.h"
#include "constraint/constraint_guide.h"
#include "index/guide.h"
#include "index/token_index.h"
#include "schema/json_schema.h"
#include "tokenizer/loop_masks.h"
#include "tokenizer/tokenizer_context.h"
#include "tools/maskctl/args.h"
#include "tools/maskctl/command.h"
#include "tools/maskctl/percentile.h"
#include "tools/maskctl/schema_options.h"
#include "tools/maskctl/tokenizer_flag.h"

namespace maskctl {
namespace {

using ojson = nlohmann::ordered_json;

// Wall time, or with --cpu-time this process's CPU time (a loaded machine
// distorts it less).
bool g_cpu_time = false;

struct Clock {
  using time_point = double;  // µs
  static time_point now() {
    timespec ts;
    clock_gettime(g_cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  }
};

double UsSince(Clock::time_point t0) { return Clock::now() - t0; }

struct Totals {
  int64_t schemas = 0, compiled = 0, passing = 0;
  int64_t grammar_route = 0;  // of compiled: schemas on the grammar route
  int64_t valid = 0, valid_accepted = 0, invalid = 0, invalid_rejected = 0;
  std::vector<double> ttfm_us, tbm_us;
  // --stages (regex route only).
  std::vector<double> convert_us, dfa_index_us, first_mask_us, staged_ttfm_us;
  double tbm_first_visit_us = 0, tbm_revisit_us = 0;
  int64_t tbm_first_visits = 0, tbm_revisits = 0;

  void Add(const Totals& o) {
    schemas += o.schemas;
    compiled += o.compiled;
    passing += o.passing;
    grammar_route += o.grammar_route;
    valid += o.valid;
    valid_accepted += o.valid_accepted;
    invalid += o.invalid;
    invalid_rejected += o.invalid_rejected;
    ttfm_us.insert(ttfm_us.end(), o.ttfm_us.begin(), o.ttfm_us.end());
    tbm_us.insert(tbm_us.end(), o.tbm_us.begin(), o.tbm_us.end());
    for (auto [to, from] : {std::pair{&convert_us, &o.convert_us}, {&dfa_index_us, &o.dfa_index_us},
                            {&first_mask_us, &o.first_mask_us}, {&staged_ttfm_us, &o.staged_ttfm_us}}) {
      to->insert(to->end(), from->begin(), from->end());
    }
    tbm_first_visit_us += o.tbm_first_visit_us;
    tbm_revisit_us += o.tbm_revisit_us;
    tbm_first_visits += o.tbm_first_visits;
    tbm_revisits += o.tbm_revisits;
  }
};

double Round2(double v) { return static_cast<double>(static_cast<int64_t>(v * 100 + 0.5)) / 100; }

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

ojson StagesJson(const Totals& t) {
  ojson j;
  const double ttfm = std::max(1e-9, Sum(t.staged_ttfm_us));
  j["schemas"] = t.staged_ttfm_us.size();
  j["convert_p50_us"] = Round2(Percentile(t.convert_us, 0.5));
  j["dfa_index_p50_us"] = Round2(Percentile(t.dfa_index_us, 0.5));
  j["first_mask_p50_us"] = Round2(Percentile(t.first_mask_us, 0.5));
  j["convert_share"] = Round2(Sum(t.convert_us) / ttfm);
  j["dfa_index_share"] = Round2(Sum(t.dfa_index_us) / ttfm);
  j["first_mask_share"] = Round2(Sum(t.first_mask_us) / ttfm);
  const double tbm = std::max(1e-9, t.tbm_first_visit_us + t.tbm_revisit_us);
  j["tbm_steps"] = t.tbm_first_visits + t.tbm_revisits;
  j["tbm_first_visits"] = t.tbm_first_visits;
  j["tbm_first_visit_share"] = Round2(t.tbm_first_visit_us / tbm);
  j["tbm_first_visit_avg_us"] =
      Round2(t.tbm_first_visits ? t.tbm_first_visit_us / static_cast<double>(t.tbm_first_visits) : 0);
  j["tbm_revisit_avg_us"] =
      Round2(t.tbm_revisits ? t.tbm_revisit_us / static_cast<double>(t.tbm_revisits) : 0);
  return j;
}

// One line of totals; with `stages`, their "stages" too.
void PrintTotals(const std::string& file, const Totals& t, bool stages) {
  double avg = 0;
  for (double x : t.tbm_us) avg += x;
  if (!t.tbm_us.empty()) avg /= static_cast<double>(t.tbm_us.size());
  ojson j;
  j["file"] = file;
  j["schemas"] = t.schemas;
  j["compiled"] = t.compiled;
  j["passing"] = t.passing;
  if (t.grammar_route > 0) j["grammar_route"] = t.grammar_route;  // --route auto|grammar
  j["valid"] = t.valid;
  j["valid_accepted"] = t.valid_accepted;
  j["invalid"] = t.invalid;
  j["invalid_rejected"] = t.invalid_rejected;
  j["ttfm_p50_us"] = Round2(Percentile(t.ttfm_us, 0.5));
  j["ttfm_p99_us"] = Round2(Percentile(t.ttfm_us, 0.99));
  j["ttfm_max_us"] = Round2(t.ttfm_us.empty() ? 0.0 : *std::max_element(t.ttfm_us.begin(), t.ttfm_us.end()));
  j["tbm_p50_us"] = Round2(Percentile(t.tbm_us, 0.5));
  j["tbm_avg_us"] = Round2(avg);
  j["tbm_p99_us"] = Round2(Percentile(t.tbm_us, 0.99));
  if (stages) j["stages"] = StagesJson(t);
  // json.dumps-style separators, as the rest of maskctl's output.
  std::string s = j.dump(-1, ' ', false, ojson::error_handler_t::replace);
  std::string out;
  bool in_str = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    out.push_back(c);
    if (c == '"' && (i == 0 || s[i - 1] != '\\')) in_str = !in_str;
    if (!in_str && (c == ',' || c == ':')) out.push_back(' ');
  }
  std::printf("%s\n", out.c_str());
  std::fflush(stdout);
}

// Finds tokens by their bytes.
class TokenLookup {
 public:
  explicit TokenLookup(const maskd::Vocabulary& vocab) {
    for (uint32_t id = 0; id < vocab.size(); ++id) {
      if (!vocab.has_token(id) || vocab.is_special(id)) continue;
      std::string_view b = vocab.bytes(id);
      if (b.empty()) continue;
      map_[b].push_back(id);
      max_len_ = std::max(max_len_, b.size());
    }
  }
  // The longest token allowed by `g` that is a prefix of `rest`; -1 if none.
  int64_t LongestAllowed(const maskd::Guide& g, std::string_view rest) const {
    return LongestWhere([&](uint32_t id) { return g.IsAllowed(id); }, rest);
  }
  // The same, with the allowed tokens given by a mask row.
  int64_t LongestAllowed(const std::vector<uint32_t>& mask, std::string_view rest) const {
    return LongestWhere([&](uint32_t id) { return (mask[id >> 5] >> (id & 31)) & 1; }, rest);
  }

 private:
  template <typename Allowed>
  int64_t LongestWhere(Allowed allowed, std::string_view rest) const {
    for (size_t len = std::min(max_len_, rest.size()); len > 0; --len) {
      auto it = map_.find(rest.substr(0, len));
      if (it == map_.end()) continue;
      for (uint32_t id : it->second)
        if (allowed(id)) return id;
    }
    return -1;
  }

  absl::flat_hash_map<std::string_view, std::vector<uint32_t>> map_;
  size_t max_len_ = 0;
};

struct Reasons {
  std::map<std::string, int64_t> counts;
  void Add(const std::string& r) { counts[r]++; }
};

std::string ReasonKey(const std::string& msg) {
  auto q = msg.find("unsupported keyword \"");
  if (q != std::string::npos) {
    auto e = msg.find('"', q + 21);
    return "unsupported keyword " + msg.substr(q + 21, e - q - 21);
  }
  if (msg.find("pattern") != std::string::npos) return "pattern";
  return msg.substr(0, std::min<size_t>(msg.size(), 48));
}

// maskbench's flags but the tokenizer's.
struct MaskbenchFlags {
  uint64_t timeout_s = 10;  // --timeout-s
  maskd::JsonSchemaOptions schema;
  // The regex route by default: the figures in docs/benchmarks.md are its.
  maskd::SchemaRoute route = maskd::SchemaRoute::kRegex;
  bool verbose = false, fresh = false, cpu_time = false, stages = false;
  bool require_text = false, share_loops = true;
  uint64_t slowest = 0;  // --slowest N
  // --auto-route-max-regex-bytes, --auto-route-max-regex-nodes
  // (CompileLimits; 0: no cap)
  size_t auto_route_max_regex_bytes = maskd::CompileLimits::kDefaultAutoRouteMaxRegexBytes;
  size_t auto_route_max_regex_nodes = maskd::CompileLimits::kDefaultAutoRouteMaxRegexNodes;
  // --eager-dfa-states, --eager-terminal-dfa-states (CompileLimits; 0:
  // every large DFA lazy)
  uint32_t eager_dfa_states = maskd::CompileLimits::kDefaultEagerDfaStates;
  uint32_t eager_terminal_dfa_states = maskd::CompileLimits::kDefaultEagerTerminalDfaStates;
};

absl::StatusOr<MaskbenchFlags> ReadMaskbenchFlags(const Args& args) {
  if (args.positional().empty()) return absl::InvalidArgumentError("expected one or more FILE.jsonl");
  MaskbenchFlags flags;
  auto timeout_s = args.GetUint("timeout-s", 10);
  if (!timeout_s.ok()) return timeout_s.status();
  flags.timeout_s = *timeout_s;
  if (auto s = ParseSchemaOptions(args, &flags.schema); !s.ok()) return s;
  if (auto name = args.Get("route")) {
    auto r = maskd::SchemaRouteNamed(*name);
    if (!r) return absl::InvalidArgumentError("--route: expected auto, regex or grammar");
    flags.route = *r;
  }
  flags.verbose = args.Has("verbose");
  flags.fresh = args.Has("fresh");
  flags.cpu_time = args.Has("cpu-time");
  flags.stages = args.Has("stages");
  flags.require_text = args.Has("require-text");
  flags.share_loops = !args.Has("no-share-loops");
  auto slowest = args.GetUint("slowest", 0);
  if (!slowest.ok()) return slowest.status();
  flags.slowest = *slowest;
  for (auto [name, out] : {std::pair{"auto-route-max-regex-bytes", &flags.auto_route_max_regex_bytes},
                           std::pair{"auto-route-max-regex-nodes", &flags.auto_route_max_regex_nodes}}) {
    auto cap = args.GetUint(name, *out);
    if (!cap.ok()) return cap.status();
    *out = static_cast<size_t>(*cap);
  }
  for (auto [name, out] : {std::pair{"eager-dfa-states", &flags.eager_dfa_states},
                           std::pair{"eager-terminal-dfa-states", &flags.eager_terminal_dfa_states}}) {
    auto states = args.GetUint(name, *out);
    if (!states.ok()) return states.status();
    if (*states > UINT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": at most 2^32 - 1"));
    }
    *out = static_cast<uint32_t>(*states);
  }
  return flags;
}

// With --require-text: every test of `doc` has a string "text".
absl::Status CheckTestTexts(const ojson& doc, const std::string& path, int64_t line_no) {
  if (!doc.contains("tests")) return absl::OkStatus();
  int64_t k = 0;
  for (const auto& t : doc.at("tests")) {
    if (!t.is_object() || !t.contains("text") || !t.at("text").is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_no, ": test ", k, " has no string \"text\" (--require-text)"));
    }
    ++k;
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT naming the line unless `doc` has MaskBench's shape: an
// object with "schema", a string "file" if any, and "tests" (if any) an array
// of objects whose "valid" is a boolean and "text" a string where present.
absl::Status CheckCaseShape(const ojson& doc, const std::string& path, int64_t line_no) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", what));
  };
  if (!doc.is_object()) return bad("not a JSON object");
  if (!doc.contains("schema")) return bad("no \"schema\"");
  if (doc.contains("file") && !doc.at("file").is_string()) return bad("\"file\" is not a string");
  if (!doc.contains("tests")) return absl::OkStatus();
  if (!doc.at("tests").is_array()) return bad("\"tests\" is not an array");
  int64_t k = 0;
  for (const auto& t : doc.at("tests")) {
    if (!t.is_object()) return bad(absl::StrCat("test ", k, " is not an object"));
    if (t.contains("valid") && !t.at("valid").is_boolean()) {
      return bad(absl::StrCat("test ", k, ": \"valid\" is not a boolean"));
    }
    if (t.contains("text") && !t.at("text").is_string()) {
      return bad(absl::StrCat("test ", k, ": \"text\" is not a string"));
    }
    ++k;
  }
  return absl::OkStatus();
}

// One schema line being run: where its failures are reported, where its
// counts go, and its compilation's times.
struct SchemaCase {
  const std::string* path;
  std::string name;  // the line's "file", or "line N"
  const ojson* doc;
  std::string schema_text;  // its "schema", as JSON text
  Totals* tot;
  Clock::time_point t0 = 0;  // before the compile: where TTFM starts
  double compile_us = 0;     // conversion and compilation
};

// One test of a schema: an instance and whether it should be accepted.
struct Instance {
  bool valid;
  std::string text;
};

// How walking an instance went: `ok` when walked to the end with EOS allowed
// there; `pos`, where the walk stopped; the per-token times.
struct InstanceWalk {
  bool ok = true;
  // A lazy DFA's state limit refused a state the walk needed (neither an
  // acceptance nor a rejection: the schema fails, the instance counts neither).
  bool refused = false;
  size_t pos = 0;
  std::vector<double> times;  // µs, one per token (mask and advance)
};

// Runs MaskBench schemas through the engine, counting into each file's Totals
// and the failure reasons.
class MaskbenchRunner {
 public:
  MaskbenchRunner(const MaskbenchFlags& flags, std::shared_ptr<const maskd::TokenizerContext> context)
      : flags_(flags), context_(std::move(context)), vocab_(context_->vocabulary()),
        lookup_(vocab_), eos_(vocab_.eos_ids()) {}

  // Every schema line of `path` ("-": standard input). An error (the file
  // cannot be opened, a line is not JSON, a test has no text with
  // --require-text) stops the run; a schema that fails is counted, not an
  // error.
  absl::Status RunFile(const std::string& path, Totals* tot) {
    std::ifstream file;
    if (path != "-") {
      file.open(path, std::ios::binary);
      if (!file) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open"));
    }
    std::istream& in = path == "-" ? std::cin : file;
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty()) continue;
      if (absl::Status s = RunLine(path, line_no, line, tot); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // --slowest N, on stderr: the N schemas of the longest TTFM.
  void PrintSlowest() {
    const size_t n = std::min<size_t>(flags_.slowest, slowest_.size());
    std::partial_sort(slowest_.begin(), slowest_.begin() + n, slowest_.end(),
                      [](const Timed& a, const Timed& b) { return a.ttfm_us > b.ttfm_us; });
    for (size_t i = 0; i < n; ++i) {
      std::fprintf(stderr, "slowest: %.1f ms %s %s\n", slowest_[i].ttfm_us / 1000,
                   slowest_[i].route, slowest_[i].where.c_str());
    }
  }

  // --verbose, on stderr: the loop memo's counters and the top failure reasons.
  void PrintDiagnostics() const {
    const maskd::LoopMasks::Stats st = context_->loop_masks().stats();
    std::fprintf(stderr, "loop memo%s: loops %zu, hits %llu, misses %llu, bounded %llu\n",
                 flags_.fresh ? " (last schema)" : "", st.loops,
                 static_cast<unsigned long long>(st.hits),
                 static_cast<unsigned long long>(st.misses),
                 static_cast<unsigned long long>(st.bounded));
    std::vector<std::pair<int64_t, std::string>> top;
    for (auto& [k, v] : reasons_.counts) top.push_back({v, k});
    std::sort(top.rbegin(), top.rend());
    std::fprintf(stderr, "top failure reasons (failures, not schemas):\n");
    for (size_t i = 0; i < top.size() && i < 25; ++i) {
      std::fprintf(stderr, "  %6lld  %s\n", static_cast<long long>(top[i].first),
                   top[i].second.c_str());
    }
  }

 private:
  struct Timed {
    double ttfm_us;
    const char* route;
    std::string where;  // "FILE NAME" (SchemaCase::name)
  };

  // The TTFM just recorded, for --slowest.
  void NoteTtfm(const SchemaCase& c, const char* route) {
    if (flags_.slowest == 0) return;
    slowest_.push_back({c.tot->ttfm_us.back(), route, absl::StrCat(*c.path, " ", c.name)});
  }

  absl::Status RunLine(const std::string& path, int64_t line_no, const std::string& line,
                       Totals* tot) {
    ojson doc;
    try {
      doc = ojson::parse(line);
    } catch (const ojson::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", e.what()));
    }
    if (absl::Status s = CheckCaseShape(doc, path, line_no); !s.ok()) return s;
    if (flags_.require_text) {
      if (absl::Status s = CheckTestTexts(doc, path, line_no); !s.ok()) return s;
    }
    if (flags_.fresh) context_->loop_masks().Clear();
    SchemaCase c{&path, doc.value("file", absl::StrCat("line ", line_no)), &doc, "", tot};
    c.schema_text = doc["schema"].dump();
    ++tot->schemas;
    int64_t nvalid = 0, ninvalid = 0;
    if (doc.contains("tests")) {
      for (auto& t : doc["tests"]) (t.value("valid", false) ? nvalid : ninvalid)++;
    }
    tot->valid += nvalid;
    tot->invalid += ninvalid;
    RunSchema(&c);
    return absl::OkStatus();
  }

  // Compiles the schema, then its first mask and its tests on its route.
  void RunSchema(SchemaCase* c) {
    c->t0 = Clock::now();
    maskd::CompileLimits limits;
    limits.share_loops = flags_.share_loops;
    limits.auto_route_max_regex_bytes = flags_.auto_route_max_regex_bytes;
    limits.auto_route_max_regex_nodes = flags_.auto_route_max_regex_nodes;
    limits.eager_dfa_states = flags_.eager_dfa_states;
    limits.eager_terminal_dfa_states = flags_.eager_terminal_dfa_states;
    maskd::CompileBudget budget;
    budget.deadline = absl::Now() + absl::Seconds(static_cast<double>(flags_.timeout_s));
    maskd::Constraint constraint = maskd::Constraint::JsonSchema(c->schema_text, context_, flags_.schema);
    constraint.options.schema_route = flags_.route;
    auto compiled = maskd::ConstraintCompiler(std::move(limits)).Compile(constraint, budget);
    c->compile_us = UsSince(c->t0);
    if (!compiled.ok()) {
      std::string msg(compiled.status().message());
      if (maskd::FailedStage(compiled.status()) == maskd::CompileStage::kConvert) {
        NoteFailure(*c, ReasonKey(msg), "convert: " + msg);
      } else {
        NoteFailure(*c, absl::StrCat("compile: ", absl::StatusCodeToString(compiled.status().code())),
                    "compile: " + msg.substr(0, 300));
      }
      return;
    }
    if (compiled->index->route() == maskd::ConstraintRoute::kGrammar) {
      RunGrammarRoute(*c, compiled->index);
    } else {
      RunRegexRoute(*c, compiled->index->token_index());
    }
  }

  void RunGrammarRoute(const SchemaCase& c, const std::shared_ptr<const maskd::ConstraintIndex>& index) {
    ++c.tot->grammar_route;
    {
      auto g = maskd::ConstraintGuide::Create(index);
      mask_.assign(index->num_words(), 0);
      if (!g.ok() || !g->WriteMask(absl::MakeSpan(mask_)).ok()) {
        NoteFailure(c, "compile: first mask", "first mask failed");
        return;
      }
    }
    c.tot->ttfm_us.push_back(UsSince(c.t0));
    NoteTtfm(c, "grammar");
    ++c.tot->compiled;
    RunTests(c, [&](const Instance& inst) { return WalkGrammar(index, inst.text); });
  }

  // Per step: the mask, then the token (the longest the mask allows that
  // spells the text), then the advance; both timed.
  InstanceWalk WalkGrammar(const std::shared_ptr<const maskd::ConstraintIndex>& index,
                           const std::string& text) {
    InstanceWalk w;
    w.ok = false;
    auto g = maskd::ConstraintGuide::Create(index);
    if (!g.ok()) return w;
    mask_.assign(index->num_words(), 0);
    for (;;) {
      auto s0 = Clock::now();
      if (!g->WriteMask(absl::MakeSpan(mask_)).ok()) return w;
      const double mask_us = UsSince(s0);
      if (w.pos == text.size()) break;
      const int64_t id = lookup_.LongestAllowed(mask_, std::string_view(text).substr(w.pos));
      if (id < 0) return w;
      const uint32_t token = static_cast<uint32_t>(id);
      auto s1 = Clock::now();
      if (!g->Advance({&token, 1}).ok()) return w;
      w.times.push_back(mask_us + UsSince(s1));
      w.pos += vocab_.bytes(token).size();
    }
    bool eos_ok = eos_.empty() && g->IsAccepting();
    for (uint32_t e : eos_) eos_ok |= (mask_[e >> 5] >> (e & 31)) & 1;
    w.ok = eos_ok;
    return w;
  }

  void RunRegexRoute(const SchemaCase& c, const std::shared_ptr<const maskd::TokenIndex>& index) {
    Totals* tot = c.tot;
    maskd::Guide first(index);
    mask_.assign(index->num_words(), 0);
    const auto t_mask = Clock::now();
    (void)first.WriteMaskUnchecked(mask_.data());  // a refusal fails the walks too
    const double first_mask_us = UsSince(t_mask);
    tot->ttfm_us.push_back(UsSince(c.t0));
    NoteTtfm(c, "regex");
    ++tot->compiled;
    // The states whose masks this schema has computed (--stages).
    absl::flat_hash_set<uint32_t> visited;
    if (flags_.stages) {
      visited.insert(first.state());
      const auto t_convert = Clock::now();
      auto again = maskd::JsonSchemaToRegex(c.schema_text, flags_.schema);
      const double convert_us = again.ok() ? UsSince(t_convert) : 0;
      tot->convert_us.push_back(convert_us);
      tot->dfa_index_us.push_back(std::max(0.0, c.compile_us - convert_us));
      tot->first_mask_us.push_back(first_mask_us);
      tot->staged_ttfm_us.push_back(tot->ttfm_us.back());
    }
    RunTests(c, [&](const Instance& inst) { return WalkRegex(index, inst, &visited, tot); });
  }

  // Per step: the longest allowed token that spells the text, then the mask
  // and the advance, timed together. With --stages, a valid instance's step
  // time goes to first visits (a state not in *visited) or revisits.
  InstanceWalk WalkRegex(const std::shared_ptr<const maskd::TokenIndex>& index, const Instance& inst,
                         absl::flat_hash_set<uint32_t>* visited, Totals* tot) {
    const std::string& text = inst.text;
    maskd::Guide g(index);
    InstanceWalk w;
    const maskd::RefusalWatch refusals;
    while (w.pos < text.size()) {
      int64_t id = lookup_.LongestAllowed(g, std::string_view(text).substr(w.pos));
      if (id < 0) {
        w.ok = false;
        break;
      }
      const bool first_visit = flags_.stages && visited->insert(g.state()).second;
      auto s0 = Clock::now();
      (void)g.WriteMaskUnchecked(mask_.data());  // a refusal: `refusals` below
      absl::Status st = g.Advance(static_cast<uint32_t>(id));
      double us = UsSince(s0);
      if (flags_.stages && inst.valid) {
        (first_visit ? tot->tbm_first_visit_us : tot->tbm_revisit_us) += us;
        ++(first_visit ? tot->tbm_first_visits : tot->tbm_revisits);
      }
      if (!st.ok()) {
        w.ok = false;
        break;
      }
      w.times.push_back(us);
      w.pos += vocab_.bytes(static_cast<uint32_t>(id)).size();
    }
    if (w.ok) {
      bool eos_ok = false;
      for (uint32_t e : eos_) eos_ok |= g.IsAllowed(e);
      if (eos_.empty()) eos_ok = g.IsAccepting();
      w.ok = eos_ok;
    }
    w.refused = refusals.refused();
    return w;
  }

  // Walks every test of the schema with `walk` (Instance -> InstanceWalk);
  // the schema passes when every verdict is right.
  template <typename Walk>
  void RunTests(const SchemaCase& c, Walk walk) {
    bool pass = true;
    if (c.doc->contains("tests")) {
      for (const auto& t : c.doc->at("tests")) {
        const Instance inst{t.value("valid", false), t.value("text", "")};
        pass &= Record(c, inst, walk(inst));
      }
    }
    if (pass) ++c.tot->passing;
  }

  // Counts one instance's verdict; false when it fails the schema's test.
  bool Record(const SchemaCase& c, const Instance& inst, const InstanceWalk& w) {
    Totals* tot = c.tot;
    if (w.refused) {
      NoteFailure(c, "walk: DFA state limit", "a walk needed a DFA state past max_dfa_states");
      return false;
    }
    if (inst.valid) {
      tot->tbm_us.insert(tot->tbm_us.end(), w.times.begin(), w.times.end());
      if (w.ok) {
        ++tot->valid_accepted;
        return true;
      }
      NoteFailure(c, "valid instance rejected",
                  absl::StrCat("valid rejected at byte ", w.pos, ": ", inst.text.substr(0, 200)));
      return false;
    }
    if (!w.ok) {
      ++tot->invalid_rejected;
      return true;
    }
    NoteFailure(c, "invalid instance accepted",
                absl::StrCat("invalid accepted: ", inst.text.substr(0, 200)));
    return false;
  }

  // Counts a failure under `reason`; with --verbose, prints `detail`.
  void NoteFailure(const SchemaCase& c, const std::string& reason, const std::string& detail) {
    reasons_.Add(reason);
    if (flags_.verbose) {
      std::fprintf(stderr, "%s: %s: %s\n", c.path->c_str(), c.name.c_str(), detail.c_str());
    }
  }

  const MaskbenchFlags& flags_;
  const std::shared_ptr<const maskd::TokenizerContext> context_;
  const maskd::Vocabulary& vocab_;
  const TokenLookup lookup_;
  const std::vector<uint32_t>& eos_;
  Reasons reasons_;
  std::vector<Timed> slowest_;  // --slowest: every compiled schema's TTFM
  std::vector<uint32_t> mask_;  // a mask row, reused
};

int RunMaskbench(const Context& ctx) {
  auto flags = ReadMaskbenchFlags(ctx.args);
  if (!flags.ok()) return Fail("maskbench", std::string(flags.status().message()));
  g_cpu_time = flags->cpu_time;
  auto context = LoadTokenizerContextFlag(ctx.args);
  if (!context.ok()) return Fail("maskbench", std::string(context.status().message()));
  MaskbenchRunner runner(*flags, *context);
  Totals all;
  for (const std::string& path : ctx.args.positional()) {
    Totals tot;
    if (absl::Status s = runner.RunFile(path, &tot); !s.ok()) {
      return Fail("maskbench", std::string(s.message()));
    }
    PrintTotals(path, tot, flags->stages);
    all.Add(tot);
  }
  PrintTotals("all", all, flags->stages);
  if (flags->slowest > 0) runner.PrintSlowest();
  if (flags->verbose) runner.PrintDiagnostics();
  return 0;
}

}  // namespace

MASKCTL_COMMAND(maskbench, "maskbench",
                "MaskBench files (JSON lines of schemas and tests) end to end: pass rates, TTFM, TBM",
                Form{"maskbench --tokenizer PATH [--vocab-size N] [--eos ID[,ID...]] FILE.jsonl "
                     "[FILE.jsonl ...] [--timeout-s N] [--route regex|auto|grammar] "
                     "[--auto-route-max-regex-bytes N] [--auto-route-max-regex-nodes N] [--eager-dfa-states N] [--eager-terminal-dfa-states N] [--verbose] [--slowest N] "
                     "[--no-share-loops] [--fresh] [--require-text] [--cpu-time] [--stages] "
                     MASKCTL_SCHEMA_OPTIONS_USAGE,
                     Union({TokenizerValueFlags(), SchemaValueFlags(), {"timeout-s", "route", "auto-route-max-regex-bytes", "auto-route-max-regex-nodes", "eager-dfa-states", "eager-terminal-dfa-states", "slowest"}}),
                     Union({SchemaBoolFlags(), {"verbose", "no-share-loops", "fresh", "require-text",
                                                "cpu-time", "stages"}})},
                Form{}, RunMaskbench);

}  // namespace maskctl
