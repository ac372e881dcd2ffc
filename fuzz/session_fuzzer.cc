// libFuzzer: sessions driven through the service core that the session RPCs
// run (SessionTable + StepBatch, as Maskd.CreateSession, Step, StepStream,
// Rollback, ForkSession and CloseSession do; IndexCache compiles the
// constraint as Maskd.Compile does) over the tiny vocabulary
// (fuzz/tiny_vocabulary.h); after every operation each live session's mask,
// accepting and finished flags, min_bytes_to_finish and forced bytes are
// compared with a stateless replay of its token history
// (ConstraintGuide::Replay then WriteMask / ApplyTokenBudget, as Maskd.Mask
// computes them).
//
// Input: [config][constraint]["\n%%\n"][operations]; without the separator
// the whole rest is the constraint and the operations are empty.
//  config & 7: 0 regex, 1 JSON Schema (auto route), 2 JSON Schema (grammar
//    route), 3 Lark, 4 GBNF, 5 XGrammar EBNF, 6 / 7 a grammar generated from
//    the constraint's bytes (GenerateGrammar) in GBNF / Lark;
//  (config >> 3) & 3: the regex route's rollback window: 2, 4, 8 or 64;
//  (config >> 5) & 3: the grammar chart budget: none, 4 KiB, 64 KiB, 1 MiB;
//  config >> 7: --max-sessions 3 (else 6).
// One session is created first; then each operation is a byte (% 6) and its
// arguments (a missing byte reads 0):
//  0 Step: a batch [n | pad] of 1 + n % 4 entries, rows of the widest mask
//    plus (pad >> 2) % 3 words; each entry [target][rollback][count | budget]
//    then one byte per token: < 0xF0 picks among the tokens the replay
//    allows there, else 0xF0 EOS, 0xF1 an id past the vocabulary, 0xF2
//    2^32 - 1, other: the next byte as an id;
//  1 Stream: 2 + b % 3 such batches in a row (a StepStream's messages), no
//    comparison between them;
//  2 Rollback [target][n]; 3 Fork [target]; 4 Close [target]; 5 Create.
// A target byte < 0xE0 picks a live session, < 0xF0 a closed one, else an id
// never handed out. After each operation one batch steps every live session
// by nothing (one of them twice when the operation byte's high bit is set,
// with a token budget) and each result is compared with the replay.
//
// Bug: a crash, a sanitizer report, a hang; a status other than the
// documented one for what the model knows (NOT_FOUND for a closed or unknown
// id, INVALID_ARGUMENT for a rollback past the start or a bad token id,
// OUT_OF_RANGE past the regex route's rollback window, FAILED_PRECONDITION
// for a token the replay refuses, RESOURCE_EXHAUSTED for a full table or, on
// the grammar route only, a parser or chart limit); a session that accepts
// what the replay refuses or the reverse; a mask, flag or forced byte that
// differs from the replay's; a row word not written (StepBatch's row rule);
// chart bytes still charged once every session is gone. Work per input is
// bounded by small limits (constraint bytes, DFA states, parser steps,
// kMaxOps, kMaxTokens, kMaxHistory).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "constraint/constraint_guide.h"
#include "fuzz/expect_status.h"
#include "fuzz/tiny_vocabulary.h"
#include "service/index_cache.h"
#include "service/session_table.h"
#include "service/step_batch.h"
#include "tokenizer/mask_budget.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace {

using namespace maskd;  // NOLINT: a fuzzer's one file

constexpr size_t kMaxConstraintBytes = 1024;
constexpr int kMaxOps = 32;
constexpr size_t kMaxTokens = 160;   // advanced over all steps of an input
constexpr size_t kMaxHistory = 48;   // a step that would pass it carries no token
constexpr uint32_t kEos = 270;       // tiny vocabulary: 271 tokens, 9 words
constexpr uint32_t kUnknownId = 1;   // ids are 64 random bits, never handed out as 1

// SESSION_FUZZER_TRACE=1: each compile refusal and step outcome on stderr
// (to read what an input does; off while fuzzing).
bool Trace() {
  static const bool on = std::getenv("SESSION_FUZZER_TRACE") != nullptr;
  return on;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "session_fuzzer: %s\n", what.c_str());
  std::abort();
}

using fuzz::TinyTokenizer;

// One cache for the process (its threads and memo outlive the inputs), with
// limits small enough that no constraint takes long.
IndexCache& Cache() {
  static IndexCache* cache = [] {
    IndexCacheOptions o;
    o.max_bytes = uint64_t{256} << 20;
    o.max_mask_bytes = uint64_t{64} << 20;
    o.compile_threads = 1;
    o.compile_timeout = absl::Seconds(2);
    o.failure_ttl = absl::Seconds(1);
    CompileLimits& c = o.compile;
    c.regex.max_pattern_bytes = 4096;
    c.regex.max_repeat = 32;
    c.max_dfa_states = 2000;
    c.max_nfa_states = 20000;
    c.grammar.max_text_bytes = kMaxConstraintBytes;
    c.grammar.max_rules = 200;
    c.grammar.max_terminals = 100;
    c.grammar.max_symbols = 2000;
    c.grammar.max_nesting = 32;
    c.grammar.max_repeat = 16;
    c.grammar_index.earley.max_items_per_position = 4096;
    c.grammar_index.earley.max_steps_per_position = 1 << 14;
    c.grammar_index.earley.max_chart_items = 1 << 15;
    c.grammar_index.max_mask_work = 1 << 16;
    c.grammar_index.max_memo_bytes = 4 << 20;
    c.grammar_index.max_parser_steps = 1 << 18;
    return new IndexCache(o, nullptr);
  }();
  return *cache;
}

// Bytes read in order; 0 once used up.
struct Reader {
  std::string_view bytes;
  size_t at = 0;
  uint8_t Next() { return at < bytes.size() ? static_cast<uint8_t>(bytes[at++]) : 0; }
  bool done() const { return at >= bytes.size(); }
};

// A grammar of 1-4 rules of 1-3 alternatives of 0-3 items (literals,
// character classes, references to any rule, groups with * + ?), so that
// most inputs compile: recursion, ambiguity and empty alternatives included.
std::string GenerateItem(Reader& r, int rules, bool lark) {
  static const char* kLiterals[] = {"a", "b", "ab", "{\\\"", "true", "1", "00", " "};
  static const char* kClasses[] = {"[a-c]", "[0-9]", "[^a]", "[ab]"};
  static const char* kQuantifiers[] = {"*", "+", "?"};
  const uint8_t kind = r.Next() % 8, arg = r.Next();
  auto name = [&](int i) {
    return i == 0 ? std::string(lark ? "start" : "root") : absl::StrCat("r", i);
  };
  std::string literal = absl::StrCat("\"", kLiterals[arg % 8], "\"");
  std::string cls = lark ? absl::StrCat("/", kClasses[arg % 4], "/") : kClasses[arg % 4];
  switch (kind) {
    case 0: case 1: return literal;
    case 2: return cls;
    case 3: case 4: return name(arg % rules);
    case 5: return absl::StrCat("(", literal, " | ", name(arg % rules), ")", kQuantifiers[arg % 3]);
    case 6: return absl::StrCat("(", name(arg % rules), ")", kQuantifiers[arg % 3]);
    default: return absl::StrCat(literal, kQuantifiers[arg % 3]);
  }
}

std::string GenerateGrammar(std::string_view bytes, bool lark) {
  Reader r{bytes};
  const uint8_t head = r.Next();
  const int rules = 1 + head % 4;
  std::string out;
  for (int i = 0; i < rules; ++i) {
    out += i == 0 ? (lark ? "start:" : "root ::=") : (lark ? absl::StrCat("r", i, ":")
                                                            : absl::StrCat("r", i, " ::="));
    const int alts = 1 + r.Next() % 3;
    for (int a = 0; a < alts; ++a) {
      if (a > 0) out += " |";
      const int items = r.Next() % 4;
      if (items == 0) out += lark ? " \"a\"?" : " \"\"";
      for (int k = 0; k < items; ++k) out += " " + GenerateItem(r, rules, lark);
    }
    out += "\n";
  }
  if (lark && (head & 0x80)) out += "%ignore \" \"\n";
  return out;
}

// The compile request of `config`; false when the input cannot make one.
bool MakeSpec(uint8_t config, std::string_view text, CompileSpec* spec) {
  if (text.size() > kMaxConstraintBytes) return false;
  spec->tokenizer = "tiny";
  spec->client = "session_fuzzer";
  Constraint& c = spec->constraint;
  c.tokenizer = TinyTokenizer();
  c.text = std::string(text);
  switch (config & 7) {
    case 0: c.kind = ConstraintKind::kRegex; break;
    case 1: case 2:
      c.kind = ConstraintKind::kJsonSchema;
      c.options.schema_route = (config & 7) == 2 ? SchemaRoute::kGrammar : SchemaRoute::kAuto;
      break;
    default:
      c.kind = ConstraintKind::kGrammar;
      c.options.grammar_format = (config & 7) == 4 || (config & 7) == 6 ? GrammarFormat::kGbnf
                                 : (config & 7) == 5                    ? GrammarFormat::kEbnf
                                                                        : GrammarFormat::kLark;
      if ((config & 7) >= 6) c.text = GenerateGrammar(text, (config & 7) == 7);
  }
  return true;
}

// The index of `spec`, compiled and leased as Maskd.CreateSession does; null
// when the constraint is refused (a client error).
std::shared_ptr<IndexLease> CompileAndLease(const CompileSpec& spec) {
  struct Waiter {
    absl::Notification done;
    IndexInfo info;
  };
  auto waiter = std::make_shared<Waiter>();
  auto snap = Cache().Compile(spec, [waiter](const IndexInfo& info) {
    waiter->info = info;
    waiter->done.Notify();
  });
  fuzz::ExpectClientStatus(snap.status());
  if (!snap.ok()) return nullptr;
  IndexInfo info = *snap;
  if (info.state == IndexState::kCompiling) {
    waiter->done.WaitForNotification();
    info = waiter->info;
  }
  if (info.state == IndexState::kFailed) {
    if (Trace()) std::fprintf(stderr, "compile: %s\n", info.status.ToString().c_str());
    fuzz::ExpectClientStatus(info.status, fuzz::Deadline::kSet);
    return nullptr;
  }
  auto lease = Cache().Lease(info.id);
  fuzz::ExpectClientStatus(lease.status());
  return lease.ok() ? *std::move(lease) : nullptr;
}

// What Maskd.Mask answers for a token history (and a token budget, 0: none).
struct Expect {
  absl::Status status;
  std::vector<uint32_t> mask;
  bool accepting = false;
  bool finished = false;
  uint32_t min_bytes_to_finish = 0;
  std::string forced;
};

class Replayer {
 public:
  explicit Replayer(std::shared_ptr<const ConstraintIndex> index) : index_(std::move(index)) {}

  const Expect& Get(const std::vector<uint32_t>& history, uint32_t budget) {
    auto [it, added] = memo_.try_emplace({history, budget});
    if (added) Compute(history, budget, &it->second);
    return it->second;
  }

 private:
  void Compute(const std::vector<uint32_t>& history, uint32_t budget, Expect* e) const {
    auto guide = ConstraintGuide::Replay(index_, history);
    e->status = guide.status();
    if (guide.ok()) {
      e->mask.assign(index_->num_words(), 0);
      e->status = guide->WriteMask(absl::MakeSpan(e->mask));
      if (e->status.ok() && budget > 0) {
        e->status = guide->ApplyTokenBudget(budget, absl::MakeSpan(e->mask));
      }
      e->accepting = guide->IsAccepting();
      e->finished = guide->IsFinished();
      e->min_bytes_to_finish = guide->MinBytesToFinish();
      e->forced = guide->ForcedContinuation();
    }
    const absl::StatusCode c = e->status.code();
    const bool documented =
        e->status.ok() || c == absl::StatusCode::kInvalidArgument ||
        c == absl::StatusCode::kFailedPrecondition ||
        (c == absl::StatusCode::kResourceExhausted &&
         index_->route() == ConstraintRoute::kGrammar);
    if (!documented) Fail(absl::StrCat("replay: unexpected status ", e->status.ToString()));
  }

  const std::shared_ptr<const ConstraintIndex> index_;
  std::map<std::pair<std::vector<uint32_t>, uint32_t>, Expect> memo_;
};

// The model of one live session: what it has accepted.
struct Model {
  uint64_t id = 0;
  std::vector<uint32_t> history;
  size_t rollback_available = 0;  // regex route: min(tokens, window) as Guide keeps it
};

// An entry as built, with the target it names.
struct Entry {
  int live = -1;  // index into live_, or -1 for a closed or unknown id
  uint64_t id = 0;
  uint32_t rollback = 0;
  std::vector<uint32_t> tokens;
  uint32_t budget = 0;
};

// What the model says of an entry on a live session.
struct Prediction {
  absl::StatusCode code = absl::StatusCode::kOk;  // kResourceExhausted: the replay could not tell
  Model after;
  const Expect* expect = nullptr;  // the replay of after.history (OK only)
};

class Driver {
 public:
  Driver(std::shared_ptr<IndexLease> lease, uint8_t config, std::string_view ops);
  ~Driver();
  void Run();

 private:
  bool grammar() const { return lease_->index()->route() == ConstraintRoute::kGrammar; }
  uint32_t words() const { return lease_->index()->num_words(); }
  void Operation(uint8_t op);
  int Target(uint8_t b, uint64_t* id) const;
  Prediction Predict(const Model& m, uint32_t rollback, const std::vector<uint32_t>& tokens,
                     uint32_t budget);
  uint32_t PickToken(const Model& base, uint32_t rollback, const std::vector<uint32_t>& so_far);
  std::vector<Entry> BuildBatch();
  Entry BuildEntry(std::vector<Model>& predicted);
  void RunBatch(const std::vector<Entry>& entries, uint32_t pad);
  void CheckEntry(const Entry& e, const StepEntryResult& r, absl::Span<const uint32_t> row);
  void CheckOk(const Entry& e, const StepEntryResult& r, absl::Span<const uint32_t> row,
               const Prediction& p);
  void CheckUnchanged(const Model& m, const StepEntryResult& r, absl::Span<const uint32_t> row);
  void Probe(uint8_t op);
  void Rollback();
  void Fork();
  void Close();
  void Create();

  const std::shared_ptr<IndexLease> lease_;
  const size_t window_;
  const size_t max_sessions_;
  std::shared_ptr<MaskBudget> chart_budget_;
  std::unique_ptr<SessionTable> table_;
  std::unique_ptr<StepBatch> batch_;
  Replayer replay_;
  Reader ops_;
  std::vector<Model> live_;
  std::vector<uint64_t> closed_;
  size_t tokens_left_ = kMaxTokens;
};

Driver::Driver(std::shared_ptr<IndexLease> lease, uint8_t config, std::string_view ops)
    : lease_(std::move(lease)),
      window_(std::vector<size_t>{2, 4, 8, 64}[(config >> 3) & 3]),
      max_sessions_(config & 0x80 ? 3 : 6),
      replay_(lease_->index()),
      ops_{ops} {
  const uint64_t budgets[] = {0, 4 << 10, 64 << 10, 1 << 20};
  if (const uint64_t b = budgets[(config >> 5) & 3]; b > 0) {
    chart_budget_ = std::make_shared<MaskBudget>(b);
  }
  SessionTableOptions o;
  o.max_sessions = max_sessions_;
  o.rollback_window = window_;
  o.ttl = absl::Hours(1);
  o.grammar_chart_budget = chart_budget_;
  table_ = std::make_unique<SessionTable>(o, nullptr);
  StepLimits limits;
  limits.max_batch = 64;
  limits.max_tokens_per_request = 1024;
  batch_ = std::make_unique<StepBatch>(table_.get(), nullptr, limits);
}

// Every session gone, the chart budget must be back to zero.
Driver::~Driver() {
  batch_.reset();
  table_.reset();
  if (chart_budget_ != nullptr && chart_budget_->used() != 0) {
    Fail(absl::StrCat(chart_budget_->used(), " chart bytes still charged with no session left"));
  }
}

void Driver::Run() {
  Create();
  Probe(0);
  for (int i = 0; i < kMaxOps && !ops_.done(); ++i) {
    const uint8_t op = ops_.Next();
    Operation(op);
    Probe(op);
  }
}

void Driver::Operation(uint8_t op) {
  switch (op % 6) {
    case 0: {
      const uint8_t shape = ops_.Next();
      std::vector<Entry> entries = BuildBatch();
      RunBatch(entries, (shape >> 2) % 3);
      break;
    }
    case 1:
      for (int k = 2 + ops_.Next() % 3; k > 0; --k) RunBatch(BuildBatch(), 0);
      break;
    case 2: Rollback(); break;
    case 3: Fork(); break;
    case 4: Close(); break;
    default: Create();
  }
}

int Driver::Target(uint8_t b, uint64_t* id) const {
  if (!live_.empty() && b < 0xE0) {
    const int i = b % static_cast<int>(live_.size());
    *id = live_[i].id;
    return i;
  }
  *id = !closed_.empty() && b < 0xF0 ? closed_[b % closed_.size()] : kUnknownId;
  return -1;
}

Prediction Driver::Predict(const Model& m, uint32_t rollback, const std::vector<uint32_t>& tokens,
                           uint32_t budget) {
  Prediction p;
  p.after = m;
  if (rollback > m.history.size()) {
    p.code = absl::StatusCode::kInvalidArgument;
  } else if (!grammar() && rollback > m.rollback_available) {
    p.code = absl::StatusCode::kOutOfRange;
  } else {
    p.after.history.resize(m.history.size() - rollback);
    p.after.history.insert(p.after.history.end(), tokens.begin(), tokens.end());
    if (!grammar()) {
      p.after.rollback_available =
          std::min(m.rollback_available - rollback + tokens.size(), window_);
    }
    p.expect = &replay_.Get(p.after.history, budget);
    p.code = p.expect->status.code();
  }
  return p;
}

// A token for position so_far.size() of an entry on `base` rolled back by
// `rollback`: one the replay allows there, or an odd one (see the header).
uint32_t Driver::PickToken(const Model& base, uint32_t rollback,
                           const std::vector<uint32_t>& so_far) {
  const uint8_t b = ops_.Next();
  if (b >= 0xF0) {
    switch (b) {
      case 0xF0: return kEos;
      case 0xF1: return lease_->index()->vocabulary().size();
      case 0xF2: return 0xFFFFFFFFu;
      default: return ops_.Next();
    }
  }
  std::vector<uint32_t> h(base.history.begin(),
                          base.history.end() - std::min<size_t>(rollback, base.history.size()));
  h.insert(h.end(), so_far.begin(), so_far.end());
  const Expect& e = replay_.Get(h, 0);
  std::vector<uint32_t> allowed;
  for (uint32_t t = 0; e.status.ok() && t < 32 * e.mask.size(); ++t) {
    if ((e.mask[t >> 5] >> (t & 31)) & 1) allowed.push_back(t);
  }
  return allowed.empty() ? b : allowed[b % allowed.size()];
}

Entry Driver::BuildEntry(std::vector<Model>& predicted) {
  Entry e;
  e.live = Target(ops_.Next(), &e.id);
  const uint8_t r = ops_.Next(), shape = ops_.Next();
  e.rollback = (r & 0xE0) == 0xE0 ? r & 0x1F : (r % 4 == 3 ? 1 + (r >> 2) % 3 : 0);
  e.budget = (shape >> 3) % 4 == 3 ? 1 + (shape >> 5) : 0;
  size_t count = shape % 5;
  const Model* base = e.live >= 0 ? &predicted[e.live] : nullptr;
  if (base != nullptr && base->history.size() + count > kMaxHistory + e.rollback) count = 0;
  count = std::min(count, tokens_left_);
  tokens_left_ -= count;
  const Model empty;
  while (e.tokens.size() < count) {
    e.tokens.push_back(PickToken(base ? *base : empty, e.rollback, e.tokens));
  }
  if (base != nullptr) {  // as the batch will find it: earlier entries applied
    Prediction p = Predict(*base, e.rollback, e.tokens, e.budget);
    if (p.code == absl::StatusCode::kOk) predicted[e.live] = std::move(p.after);
  }
  return e;
}

std::vector<Entry> Driver::BuildBatch() {
  std::vector<Model> predicted = live_;
  std::vector<Entry> entries(1 + ops_.Next() % 4);
  for (Entry& e : entries) e = BuildEntry(predicted);
  return entries;
}

// One batch as Maskd.Step runs it (the thread's buffers, rows placed by the
// caller), each result checked in order against the model.
void Driver::RunBatch(const std::vector<Entry>& entries, uint32_t pad) {
  absl::StatusOr<StepBatch::Buffers> io = batch_->ThreadBuffers(entries.size());
  if (!io.ok()) Fail(absl::StrCat("ThreadBuffers: ", io.status().ToString()));
  for (size_t i = 0; i < entries.size(); ++i) {
    io->entries[i] = StepEntryInput{entries[i].id, entries[i].rollback,
                                    absl::MakeConstSpan(entries[i].tokens), entries[i].budget};
  }
  std::vector<uint32_t> rows;
  uint32_t per_row = 0;
  auto place = [&](const StepBatchShape& shape) -> absl::StatusOr<StepRows> {
    for (size_t i = 0; i < entries.size(); ++i) {
      if (shape.words[i] != (entries[i].live >= 0 ? words() : 0)) Fail("lookup width");
    }
    per_row = shape.widest + pad;
    rows.assign(per_row * entries.size(), 0xDEADBEEFu);  // every word must be written
    return StepRows{rows.data(), per_row, 0};
  };
  absl::Status s = batch_->Run(io->entries, place, io->results);
  if (!s.ok()) Fail(absl::StrCat("StepBatch::Run: ", s.ToString()));
  for (size_t i = 0; i < entries.size(); ++i) {
    CheckEntry(entries[i], io->results[i],
               absl::MakeConstSpan(rows.data() + i * per_row, per_row));
  }
}

void Driver::CheckEntry(const Entry& e, const StepEntryResult& r,
                        absl::Span<const uint32_t> row) {
  const absl::StatusCode got = r.status.code();
  if (Trace()) {
    std::fprintf(stderr, "step %s: rollback %u, %zu tokens, budget %u: %s, %llu tokens\n",
                 e.live < 0 ? "-" : std::to_string(e.live).c_str(), e.rollback, e.tokens.size(),
                 e.budget, r.status.ToString().c_str(),
                 static_cast<unsigned long long>(r.num_tokens));
  }
  if (e.live < 0) {
    if (got != absl::StatusCode::kNotFound) {
      Fail("a step on a closed or unknown id: " + r.status.ToString());
    }
    CheckUnchanged(Model{}, r, row);
    return;
  }
  Model& m = live_[e.live];
  Prediction p = Predict(m, e.rollback, e.tokens, e.budget);
  if (r.status.ok()) {
    CheckOk(e, r, row, p);
    m = std::move(p.after);
    return;
  }
  const bool could_not_tell = p.code == absl::StatusCode::kResourceExhausted;
  const bool limit = got == absl::StatusCode::kResourceExhausted && grammar();
  if (got != p.code && !could_not_tell && !limit) {
    Fail(absl::StrCat("a step (rollback ", e.rollback, ", ", e.tokens.size(),
                      " tokens) failed with ", r.status.ToString(), "; the replay says ",
                      absl::StatusCodeToString(p.code)));
  }
  CheckUnchanged(m, r, row);
}

void Driver::CheckOk(const Entry& e, const StepEntryResult& r, absl::Span<const uint32_t> row,
                     const Prediction& p) {
  if (p.code != absl::StatusCode::kOk && p.code != absl::StatusCode::kResourceExhausted) {
    Fail(absl::StrCat("a step (rollback ", e.rollback, ", ", e.tokens.size(),
                      " tokens) succeeded; the replay refuses it: ",
                      p.expect ? p.expect->status.ToString() : absl::StatusCodeToString(p.code)));
  }
  if (r.num_tokens != p.after.history.size()) Fail("num_tokens differs from the history");
  for (size_t w = words(); w < row.size(); ++w) {
    if (row[w] != 0) Fail("a row's padding is not zero");
  }
  if (p.code != absl::StatusCode::kOk) return;
  const Expect& x = *p.expect;
  for (size_t w = 0; w < words(); ++w) {
    if (row[w] != x.mask[w]) {
      Fail(absl::StrCat("mask word ", w, " is ", row[w], ", the replay's ", x.mask[w], " after ",
                        p.after.history.size(), " tokens (budget ", e.budget, ")"));
    }
  }
  if (r.accepting != x.accepting || r.finished != x.finished) Fail("accepting/finished differ");
  if (r.min_bytes_to_finish != x.min_bytes_to_finish) {
    Fail(absl::StrCat("min_bytes_to_finish ", r.min_bytes_to_finish, ", the replay's ",
                      x.min_bytes_to_finish));
  }
  if (r.forced != x.forced) Fail("forced \"" + r.forced + "\", the replay's \"" + x.forced + "\"");
}

// A failed entry: a zero row and the session as the model has it.
void Driver::CheckUnchanged(const Model& m, const StepEntryResult& r,
                            absl::Span<const uint32_t> row) {
  for (uint32_t w : row) {
    if (w != 0) Fail("a failed entry's row is not zero: " + r.status.ToString());
  }
  if (r.num_tokens != m.history.size()) Fail("a failed step changed num_tokens");
  if (r.min_bytes_to_finish != 0 || !r.forced.empty()) Fail("a failed step reports progress");
  if (m.id == 0) {
    if (r.accepting || r.finished) Fail("an unknown session reports flags");
    return;
  }
  const Expect& x = replay_.Get(m.history, 0);
  if (x.status.ok() && (r.accepting != x.accepting || r.finished != x.finished)) {
    Fail("a failed step's flags differ from the unchanged session's");
  }
}

// Every live session stepped by nothing in one batch, compared.
void Driver::Probe(uint8_t op) {
  if (table_->size() != live_.size()) {
    Fail(absl::StrCat("the table holds ", table_->size(), " sessions, the model ", live_.size()));
  }
  if (live_.empty()) return;
  std::vector<Entry> entries(live_.size());
  for (size_t i = 0; i < live_.size(); ++i) {
    entries[i].live = static_cast<int>(i);
    entries[i].id = live_[i].id;
  }
  if (op & 0x80) {
    Entry again = entries[op % entries.size()];
    again.budget = 1 + ((op >> 4) & 7);
    entries.push_back(again);
  }
  RunBatch(entries, op & 1);
}

// Maskd.Rollback: Find, then Session::Rollback.
void Driver::Rollback() {
  uint64_t id;
  const int i = Target(ops_.Next(), &id);
  const uint8_t b = ops_.Next();
  const uint32_t n = b >= 0xF0 ? b & 0x0F : b % 4;
  std::shared_ptr<Session> s = table_->Find(id);
  absl::StatusOr<uint64_t> left = s ? s->Rollback(n) : SessionTable::NotFound(id);
  absl::StatusCode want = absl::StatusCode::kNotFound;
  if (i >= 0) {
    Prediction p = Predict(live_[i], n, {}, 0);
    want = p.code == absl::StatusCode::kOutOfRange || p.code == absl::StatusCode::kInvalidArgument
               ? p.code
               : absl::StatusCode::kOk;
    if (want == absl::StatusCode::kOk && left.ok()) {
      if (*left != p.after.history.size()) Fail("Rollback returned a wrong count");
      live_[i] = std::move(p.after);
    }
  }
  if (left.status().code() != want) {
    Fail(absl::StrCat("Rollback(", n, "): ", left.status().ToString(), ", expected ",
                      absl::StatusCodeToString(want)));
  }
}

void Driver::Fork() {
  uint64_t id;
  const int i = Target(ops_.Next(), &id);
  absl::StatusOr<std::shared_ptr<Session>> s = table_->Fork(id);
  if (i < 0) {
    if (s.status().code() != absl::StatusCode::kNotFound) {
      Fail("Fork of a closed or unknown id: " + s.status().ToString());
    }
    return;
  }
  if (s.ok()) {
    if (live_.size() >= max_sessions_) Fail("Fork past --max-sessions");
    Model m = live_[i];
    m.id = (*s)->id();
    live_.push_back(std::move(m));
    return;
  }
  const bool full = live_.size() >= max_sessions_;
  if (s.status().code() != absl::StatusCode::kResourceExhausted || (!full && !grammar())) {
    Fail("Fork: " + s.status().ToString());
  }
}

void Driver::Close() {
  uint64_t id;
  const int i = Target(ops_.Next(), &id);
  absl::Status s = table_->Close(id);
  const absl::StatusCode want = i >= 0 ? absl::StatusCode::kOk : absl::StatusCode::kNotFound;
  if (s.code() != want) Fail("Close: " + s.ToString());
  if (i >= 0) {
    closed_.push_back(id);
    live_.erase(live_.begin() + i);
  }
}

void Driver::Create() {
  absl::StatusOr<std::shared_ptr<Session>> s = table_->Create(lease_, "session_fuzzer");
  if (s.ok()) {
    if (live_.size() >= max_sessions_) Fail("Create past --max-sessions");
    live_.push_back(Model{(*s)->id(), {}, 0});
    return;
  }
  const bool full = live_.size() >= max_sessions_;
  if (s.status().code() != absl::StatusCode::kResourceExhausted || (!full && !grammar())) {
    Fail("Create: " + s.status().ToString());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t config = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string_view text = rest, ops;
  if (size_t split = rest.find("\n%%\n"); split != std::string_view::npos) {
    text = rest.substr(0, split);
    ops = rest.substr(split + 4);
  }
  CompileSpec spec;
  if (!MakeSpec(config, text, &spec)) return 0;
  std::shared_ptr<IndexLease> lease = CompileAndLease(spec);
  if (lease == nullptr) return 0;
  Driver(std::move(lease), config, ops).Run();
  return 0;
}
