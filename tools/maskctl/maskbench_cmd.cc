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
//    "tbm_p50_us", "tbm_avg_us", "tbm_p99_us"}
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

bool g_stages = false;

void PrintTotals(const std::string& file, const Totals& t) {
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
  j["tbm_p50_us"] = Round2(Percentile(t.tbm_us, 0.5));
  j["tbm_avg_us"] = Round2(avg);
  j["tbm_p99_us"] = Round2(Percentile(t.tbm_us, 0.99));
  if (g_stages) j["stages"] = StagesJson(t);
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

int RunMaskbench(const Context& ctx) {
  const Args* args = &ctx.args;
  if (args->positional().empty()) return Fail("maskbench", "expected one or more FILE.jsonl");
  auto timeout_s = args->GetUint("timeout-s", 10);
  if (!timeout_s.ok()) return Fail("maskbench", std::string(timeout_s.status().message()));
  maskd::JsonSchemaOptions options;
  if (auto s = ParseSchemaOptions(*args, &options); !s.ok()) {
    return Fail("maskbench", std::string(s.message()));
  }
  // The regex route by default: the figures in docs/benchmarks.md are its.
  maskd::SchemaRoute route = maskd::SchemaRoute::kRegex;
  if (auto name = args->Get("route")) {
    auto r = maskd::SchemaRouteNamed(*name);
    if (!r) return Fail("maskbench", "--route: expected auto, regex or grammar");
    route = *r;
  }
  bool verbose = args->Has("verbose");
  const bool fresh = args->Has("fresh");
  g_cpu_time = args->Has("cpu-time");
  g_stages = args->Has("stages");
  const bool require_text = args->Has("require-text");

  auto context = LoadTokenizerContextFlag(*args);
  if (!context.ok()) return Fail("maskbench", std::string(context.status().message()));
  const maskd::Vocabulary& vocab = (*context)->vocabulary();
  TokenLookup lookup(vocab);
  const std::vector<uint32_t>& eos = vocab.eos_ids();

  Totals all;
  Reasons reasons;
  std::vector<uint32_t> mask;
  for (const std::string& path : args->positional()) {
    std::ifstream file;
    if (path != "-") {
      file.open(path, std::ios::binary);
      if (!file) return Fail("maskbench", absl::StrCat(path, ": cannot open"));
    }
    std::istream& in = path == "-" ? std::cin : file;
    Totals tot;
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty()) continue;
      ojson doc;
      try {
        doc = ojson::parse(line);
      } catch (const ojson::exception& e) {
        return Fail("maskbench", absl::StrCat(path, ":", line_no, ": ", e.what()));
      }
      if (require_text && doc.contains("tests")) {
        int64_t k = 0;
        for (auto& t : doc["tests"]) {
          if (!t.is_object() || !t.contains("text") || !t["text"].is_string()) {
            return Fail("maskbench", absl::StrCat(path, ":", line_no, ": test ", k,
                                                  " has no string \"text\" (--require-text)"));
          }
          ++k;
        }
      }
      if (fresh) (*context)->loop_masks().Clear();
      std::string name = doc.value("file", absl::StrCat("line ", line_no));
      std::string schema_text = doc["schema"].dump();
      ++tot.schemas;
      int64_t nvalid = 0, ninvalid = 0;
      if (doc.contains("tests")) {
        for (auto& t : doc["tests"]) (t.value("valid", false) ? nvalid : ninvalid)++;
      }
      tot.valid += nvalid;
      tot.invalid += ninvalid;
      auto fail = [&](const std::string& key, const std::string& detail) {
        reasons.Add(key);
        if (verbose) std::fprintf(stderr, "%s: %s: %s\n", path.c_str(), name.c_str(), detail.c_str());
      };
      // One instance's verdict (`ok`: walked to the end and EOS allowed; `pos`:
      // where the walk stopped); false when it fails the schema's test.
      auto record = [&](bool valid, bool ok, size_t pos, const std::string& text,
                        const std::vector<double>& times) {
        if (valid) {
          tot.tbm_us.insert(tot.tbm_us.end(), times.begin(), times.end());
          if (ok) {
            ++tot.valid_accepted;
            return true;
          }
          fail("valid instance rejected",
               absl::StrCat("valid rejected at byte ", pos, ": ", text.substr(0, 200)));
          return false;
        }
        if (!ok) {
          ++tot.invalid_rejected;
          return true;
        }
        fail("invalid instance accepted", absl::StrCat("invalid accepted: ", text.substr(0, 200)));
        return false;
      };

      auto t0 = Clock::now();
      maskd::CompileLimits limits;
      limits.share_loops = !args->Has("no-share-loops");
      maskd::CompileBudget budget;
      budget.deadline = absl::Now() + absl::Seconds(static_cast<double>(*timeout_s));
      maskd::Constraint constraint = maskd::Constraint::JsonSchema(schema_text, *context, options);
      constraint.options.schema_route = route;
      auto compiled = maskd::ConstraintCompiler(std::move(limits)).Compile(constraint, budget);
      const double compile_us = UsSince(t0);
      if (!compiled.ok()) {
        std::string msg(compiled.status().message());
        if (maskd::FailedStage(compiled.status()) == maskd::CompileStage::kConvert) {
          fail(ReasonKey(msg), "convert: " + msg);
        } else {
          fail(absl::StrCat("compile: ", absl::StatusCodeToString(compiled.status().code())),
               "compile: " + msg.substr(0, 300));
        }
        continue;
      }
      if (compiled->index->route() == maskd::ConstraintRoute::kGrammar) {
        ++tot.grammar_route;
        // Per step: the mask, then the token (the longest the mask allows
        // that spells the text), then the advance; both timed.
        auto walk = [&](const std::string& text, std::vector<double>* times, size_t* pos) {
          auto g = maskd::ConstraintGuide::Create(compiled->index);
          if (!g.ok()) return false;
          mask.assign(compiled->index->num_words(), 0);
          for (;;) {
            auto s0 = Clock::now();
            if (!g->WriteMask(absl::MakeSpan(mask)).ok()) return false;
            const double mask_us = UsSince(s0);
            if (*pos == text.size()) break;
            const int64_t id = lookup.LongestAllowed(mask, std::string_view(text).substr(*pos));
            if (id < 0) return false;
            const uint32_t token = static_cast<uint32_t>(id);
            auto s1 = Clock::now();
            if (!g->Advance({&token, 1}).ok()) return false;
            times->push_back(mask_us + UsSince(s1));
            *pos += vocab.bytes(token).size();
          }
          bool eos_ok = eos.empty() && g->IsAccepting();
          for (uint32_t e : eos) eos_ok |= (mask[e >> 5] >> (e & 31)) & 1;
          return eos_ok;
        };
        {
          auto g = maskd::ConstraintGuide::Create(compiled->index);
          mask.assign(compiled->index->num_words(), 0);
          if (!g.ok() || !g->WriteMask(absl::MakeSpan(mask)).ok()) {
            fail("compile: first mask", "first mask failed");
            continue;
          }
        }
        tot.ttfm_us.push_back(UsSince(t0));
        ++tot.compiled;
        bool pass = true;
        if (doc.contains("tests")) {
          for (auto& t : doc["tests"]) {
            const bool valid = t.value("valid", false);
            const std::string text = t.value("text", "");
            std::vector<double> times;
            size_t pos = 0;
            const bool ok = walk(text, &times, &pos);
            pass &= record(valid, ok, pos, text, times);
          }
        }
        if (pass) ++tot.passing;
        continue;
      }
      const std::shared_ptr<const maskd::TokenIndex>& index = compiled->index->token_index();
      maskd::Guide first(index);
      mask.assign(index->num_words(), 0);
      const auto t_mask = Clock::now();
      first.WriteMaskUnchecked(mask.data());
      const double first_mask_us = UsSince(t_mask);
      tot.ttfm_us.push_back(UsSince(t0));
      ++tot.compiled;
      // The states whose masks this schema has computed (--stages).
      absl::flat_hash_set<uint32_t> visited;
      if (g_stages) {
        visited.insert(first.state());
        const auto t_convert = Clock::now();
        auto again = maskd::JsonSchemaToRegex(schema_text, options);
        const double convert_us = again.ok() ? UsSince(t_convert) : 0;
        tot.convert_us.push_back(convert_us);
        tot.dfa_index_us.push_back(std::max(0.0, compile_us - convert_us));
        tot.first_mask_us.push_back(first_mask_us);
        tot.staged_ttfm_us.push_back(tot.ttfm_us.back());
      }

      bool pass = true;
      if (doc.contains("tests")) {
        for (auto& t : doc["tests"]) {
          bool valid = t.value("valid", false);
          std::string text = t.value("text", "");
          maskd::Guide g(index);
          size_t pos = 0;
          bool ok = true;
          std::vector<double> times;
          while (pos < text.size()) {
            int64_t id = lookup.LongestAllowed(g, std::string_view(text).substr(pos));
            if (id < 0) {
              ok = false;
              break;
            }
            const bool first_visit = g_stages && visited.insert(g.state()).second;
            auto s0 = Clock::now();
            g.WriteMaskUnchecked(mask.data());
            absl::Status st = g.Advance(static_cast<uint32_t>(id));
            double us = UsSince(s0);
            if (g_stages && valid) {
              (first_visit ? tot.tbm_first_visit_us : tot.tbm_revisit_us) += us;
              ++(first_visit ? tot.tbm_first_visits : tot.tbm_revisits);
            }
            if (!st.ok()) {
              ok = false;
              break;
            }
            times.push_back(us);
            pos += vocab.bytes(static_cast<uint32_t>(id)).size();
          }
          if (ok) {
            bool eos_ok = false;
            for (uint32_t e : eos) eos_ok |= g.IsAllowed(e);
            if (eos.empty()) eos_ok = g.IsAccepting();
            ok = eos_ok;
          }
          pass &= record(valid, ok, pos, text, times);
        }
      }
      if (pass) ++tot.passing;
    }
    PrintTotals(path, tot);
    all.Add(tot);
  }
  PrintTotals("all", all);
  if (verbose) {
    const maskd::LoopMasks::Stats st = (*context)->loop_masks().stats();
    std::fprintf(stderr, "loop memo%s: loops %zu, hits %llu, misses %llu, bounded %llu\n",
                 fresh ? " (last schema)" : "", st.loops, static_cast<unsigned long long>(st.hits),
                 static_cast<unsigned long long>(st.misses),
                 static_cast<unsigned long long>(st.bounded));
    std::vector<std::pair<int64_t, std::string>> top;
    for (auto& [k, v] : reasons.counts) top.push_back({v, k});
    std::sort(top.rbegin(), top.rend());
    std::fprintf(stderr, "top failure reasons (failures, not schemas):\n");
    for (size_t i = 0; i < top.size() && i < 25; ++i) {
      std::fprintf(stderr, "  %6lld  %s\n", static_cast<long long>(top[i].first),
                   top[i].second.c_str());
    }
  }
  return 0;
}

}  // namespace

MASKCTL_COMMAND(maskbench, "maskbench",
                "MaskBench files (JSON lines of schemas and tests) end to end: pass rates, TTFM, TBM",
                Form{"maskbench --tokenizer PATH [--vocab-size N] [--eos ID[,ID...]] FILE.jsonl "
                     "[FILE.jsonl ...] [--timeout-s N] [--route regex|auto|grammar] [--verbose] "
                     "[--no-share-loops] [--fresh] [--require-text] [--cpu-time] [--stages] "
                     MASKCTL_SCHEMA_OPTIONS_USAGE,
                     Union({TokenizerValueFlags(), SchemaValueFlags(), {"timeout-s", "route"}}),
                     Union({SchemaBoolFlags(), {"verbose", "no-share-loops", "fresh", "require-text",
                                                "cpu-time", "stages"}})},
                Form{}, RunMaskbench);

}  // namespace maskctl
