// Unit tests of the gRPC-free service classes: TokenizerRegistry, IndexCache,
// SessionTable, Metrics. Bundled qwen3 tokenizer only.
#include <atomic>
#include <bit>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "index/guide.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/index_cache.h"
#include "service/metrics.h"
#include "service/session_table.h"
#include "service/tokenizer_registry.h"
#include "tokenizer/loop_masks.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace maskd {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kOne = 16, kTwo = 17, kA = 64;

std::shared_ptr<const TokenizerContext> Qwen() {
  static auto* v = new std::shared_ptr<const TokenizerContext>(TokenizerContext::Create(
      *Vocabulary::Load(std::string(MASKD_SOURCE_DIR) + "/data/tokenizers/qwen3")));
  return *v;
}

CompileSpec Spec(const std::string& regex, bool eager = false) {
  CompileSpec s;
  s.tokenizer = "qwen3";
  s.constraint = Constraint::Regex(regex, Qwen());
  s.constraint.options.eager = eager;
  return s;
}

// Compiles and waits.
IndexInfo CompileWait(IndexCache& cache, const CompileSpec& spec) {
  absl::Notification done;
  IndexInfo out;
  auto snap = cache.Compile(spec, [&](const IndexInfo& info) {
    out = info;
    done.Notify();
  });
  EXPECT_TRUE(snap.ok()) << snap.status();
  if (snap->state != IndexState::kCompiling) return *snap;
  done.WaitForNotification();
  return out;
}

TEST(TokenizerRegistryTest, LoadDirAndRegister) {
  TokenizerRegistry reg(2, /*loop_mask_bytes=*/12345);
  std::vector<std::string> errors;
  auto names = reg.LoadDir(std::string(MASKD_SOURCE_DIR) + "/data/tokenizers",
                           {{"qwen3", 151936}}, &errors);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ::testing::Contains("qwen3"));
  EXPECT_TRUE(errors.empty());
  auto q = reg.Get("qwen3");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->vocab().size(), 151936u);  // --vocab-size override: padding ids
  EXPECT_EQ(q->context->loop_masks().max_bytes(), 12345u);  // --loop-mask-bytes
  EXPECT_EQ(reg.Get("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reg.LoadDir("/nonexistent", {}, &errors).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(TokenizerRegistry::ValidName("a/b"));
  EXPECT_FALSE(TokenizerRegistry::ValidName(""));
  EXPECT_FALSE(TokenizerRegistry::ValidName(".."));
  EXPECT_TRUE(TokenizerRegistry::ValidName("llama-3.1_8B"));
  const std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
      "added_tokens": [], "decoder": {"type": "ByteLevel"}})";
  auto t = reg.Register("tiny", json, "", VocabularyOptions{});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->source, "registered");
  EXPECT_EQ(reg.Register("tiny2", json, "", {}).status().code(),
            absl::StatusCode::kResourceExhausted);  // max 2
  EXPECT_EQ(reg.List().size(), 2u);
}

// Issue #24 finding 3: one client registers at most max_per_client
// tokenizers; the refusal names the share, the flag and the client, comes
// before the document is parsed, and leaves other clients' registrations
// and same-content re-registrations served.
TEST(TokenizerRegistryTest, RegistrationsPerClientShare) {
  TokenizerRegistry reg(/*max_tokenizers=*/10, LoopMasks::kDefaultMaxBytes,
                        /*max_per_client=*/1);
  const std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
      "added_tokens": [], "decoder": {"type": "ByteLevel"}})";
  ASSERT_TRUE(reg.Register("mine", json, "", {}, "conn:1").ok());
  auto refused = reg.Register("more", json, "", {}, "conn:1");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("client conn:1 holds 1 registered tokenizers, its whole share "
                        "(--max-tokenizers-per-client=1"));
  // Refused before parsing: a broken document gets the same answer.
  EXPECT_EQ(reg.Register("broken", "{", "", {}, "conn:1").status().code(),
            absl::StatusCode::kResourceExhausted);
  // The same name and content again charges nothing.
  EXPECT_TRUE(reg.Register("mine", json, "", {}, "conn:1").ok());
  // Another client registers its own.
  auto other = reg.Register("theirs", json, "", {}, "conn:2");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(reg.List().size(), 2u);
}

TEST(IndexCacheTest, CompileHitAndIds) {
  Metrics metrics("test");
  IndexCache cache({}, &metrics);
  IndexInfo a = CompileWait(cache, Spec("[0-9]+"));
  ASSERT_EQ(a.state, IndexState::kReady) << a.status;
  EXPECT_FALSE(a.cache_hit);
  EXPECT_GT(a.dfa_states, 1u);
  EXPECT_EQ(a.vocab_size, Qwen()->vocabulary().size());
  IndexInfo b = CompileWait(cache, Spec("[0-9]+"));
  EXPECT_TRUE(b.cache_hit);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.id, IndexCache::IndexId(Spec("[0-9]+").constraint));
  EXPECT_NE(a.id, IndexCache::IndexId(Spec("[0-9]+", /*eager=*/true).constraint));
  CompileSpec schema = Spec("[0-9]+");
  schema.constraint.kind = ConstraintKind::kJsonSchema;
  EXPECT_NE(a.id, IndexCache::IndexId(schema.constraint));
  auto got = cache.Get(a.id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, IndexState::kReady);
  EXPECT_EQ(cache.Get("ix-nothing").status().code(), absl::StatusCode::kNotFound);
  std::string m = metrics.Serialize();
  EXPECT_THAT(m, HasSubstr("maskd_index_cache_hits_total 1"));
  EXPECT_THAT(m, HasSubstr("maskd_index_cache_misses_total 1"));
  EXPECT_THAT(m, HasSubstr("maskd_compile_seconds_count{kind=\"regex\",result=\"ok\"} 1"));
}

TEST(IndexCacheTest, FailuresAreCachedThenExpire) {
  IndexCacheOptions o;
  o.failure_ttl = absl::Milliseconds(200);
  IndexCache cache(o, nullptr);
  IndexInfo a = CompileWait(cache, Spec("a(b"));
  ASSERT_EQ(a.state, IndexState::kFailed);
  EXPECT_EQ(a.status.code(), absl::StatusCode::kInvalidArgument);
  IndexInfo b = CompileWait(cache, Spec("a(b"));
  EXPECT_TRUE(b.cache_hit);
  EXPECT_EQ(b.status, a.status);
  EXPECT_EQ(cache.Lease(a.id).status(), a.status);
  absl::SleepFor(absl::Milliseconds(250));
  cache.Maintain();
  EXPECT_EQ(cache.Get(a.id).status().code(), absl::StatusCode::kNotFound);
}

TEST(IndexCacheTest, DeadlineAndCancel) {
  IndexCacheOptions o;
  o.compile_threads = 1;
  o.max_pending = 2;
  IndexCache cache(o, nullptr);
  CompileSpec slow = Spec("[a-z]{1,500}q", /*eager=*/true);
  slow.timeout = absl::Milliseconds(1);
  IndexInfo a = CompileWait(cache, slow);
  EXPECT_EQ(a.status.code(), absl::StatusCode::kDeadlineExceeded) << a.status;

  // Cancel: a compilation that would take long; its waiter gets CANCELLED and
  // the entry is dropped.
  absl::Notification done;
  IndexInfo out;
  // (About 10 s each here: 8193 states, eager; the fast lane starts them at once.)
  auto snap = cache.Compile(Spec("[a-z]*a[a-z]{12}", true), [&](const IndexInfo& i) {
    out = i;
    done.Notify();
  });
  ASSERT_TRUE(snap.ok());
  // A second pending compilation fills max_pending=2; a third is refused.
  auto second = cache.Compile(Spec("[a-z]*b[a-z]{12}", true));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(cache.Compile(Spec("x")).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(cache.Cancel(snap->id));
  EXPECT_TRUE(cache.Cancel(second->id));
  done.WaitForNotification();
  if (out.state == IndexState::kFailed) {
    EXPECT_EQ(out.status.code(), absl::StatusCode::kCancelled);
    EXPECT_EQ(cache.Get(snap->id).status().code(), absl::StatusCode::kNotFound);
  }
  EXPECT_FALSE(cache.Cancel("ix-none"));
}

// A JSON Schema whose conversion alone takes over 10 s (3000 properties, each
// with an unanchored pattern that costs the converter a capped DFA build):
// Cancel ends it within the conversion, and a short timeout too.
TEST(IndexCacheTest, CancelAndDeadlineStopASchemaConversion) {
  std::string props;
  for (int i = 0; i < 3000; ++i) {
    absl::StrAppend(&props, i ? "," : "", "\"p", i, R"(":{"type":"string","pattern":"q)", i,
                    R"(.{12}z"})");
  }
  CompileSpec slow = Spec(absl::StrCat(R"({"type":"object","properties":{)", props, "}}"));
  slow.constraint.kind = ConstraintKind::kJsonSchema;
  IndexCache cache({}, nullptr);
  absl::Notification done;
  IndexInfo out;
  const absl::Time start = absl::Now();
  auto snap = cache.Compile(slow, [&](const IndexInfo& i) {
    out = i;
    done.Notify();
  });
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->state, IndexState::kCompiling);
  // Most likely inside the conversion by then; either way the answer is CANCELLED.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(cache.Cancel(snap->id));
  done.WaitForNotification();
  EXPECT_EQ(out.status.code(), absl::StatusCode::kCancelled) << out.status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));

  slow.timeout = absl::Milliseconds(200);
  IndexInfo timed_out = CompileWait(cache, slow);
  EXPECT_EQ(timed_out.status.code(), absl::StatusCode::kDeadlineExceeded) << timed_out.status;
  EXPECT_THAT(timed_out.status.message(), HasSubstr("JSON Schema conversion"));
}

TEST(IndexCacheTest, EvictionSparesLeasedAndMostRecent) {
  IndexCacheOptions o;
  o.max_bytes = 60000;
  Metrics metrics("test");
  IndexCache cache(o, &metrics);
  std::vector<uint32_t> row((Qwen()->vocabulary().size() + 31) / 32);
  IndexInfo pinned = CompileWait(cache, Spec("[0-9]{3}"));
  ASSERT_EQ(pinned.state, IndexState::kReady);
  auto lease = cache.Lease(pinned.id);
  ASSERT_TRUE(lease.ok());
  (*lease)->index()->token_index()->WriteMask((*lease)->index()->token_index()->start(), row.data());
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    IndexInfo info = CompileWait(cache, Spec("[a-z]{" + std::to_string(i + 1) + "}x"));
    ASSERT_EQ(info.state, IndexState::kReady) << info.status;
    info.index->token_index()->WriteMask(info.index->token_index()->start(), row.data());  // grows the index
    ids.push_back(info.id);
    cache.Maintain();
  }
  EXPECT_TRUE(cache.Get(pinned.id).ok());      // leased: kept
  EXPECT_TRUE(cache.Get(ids.back()).ok());     // most recent: kept
  EXPECT_FALSE(cache.Get(ids.front()).ok());   // oldest unleased: evicted
  EXPECT_THAT(metrics.Serialize(), ::testing::Not(HasSubstr("maskd_index_cache_evictions_total 0")));
  // Released: the pinned index becomes evictable.
  lease->reset();
  for (int i = 0; i < 3; ++i) {
    IndexInfo info = CompileWait(cache, Spec("[b-y]{" + std::to_string(i + 1) + "}x"));
    info.index->token_index()->WriteMask(info.index->token_index()->start(), row.data());
    cache.Maintain();
  }
  EXPECT_FALSE(cache.Get(pinned.id).ok());
  // An index larger than the whole budget fails.
  IndexCacheOptions tiny;
  tiny.max_bytes = 100;
  IndexCache small(tiny, nullptr);
  IndexInfo big = CompileWait(small, Spec("[0-9]{3}"));
  EXPECT_EQ(big.status.code(), absl::StatusCode::kResourceExhausted);
}

TEST(IndexCacheTest, LeasedIndexesCannotGrowTheCachePastItsBudget) {
  // Item 8c: sessions leasing indexes held the cache at 5x its budget. Each
  // round compiles a new index, computes a mask (the index grows) and leases
  // it, as CreateSession does.
  IndexCacheOptions o;
  o.max_bytes = 150000;
  IndexCache cache(o, nullptr);
  std::vector<uint32_t> row((Qwen()->vocabulary().size() + 31) / 32);
  std::vector<std::shared_ptr<IndexLease>> leases;
  uint64_t largest = 0;
  int refused = 0;
  for (int i = 0; i < 30; ++i) {
    auto snap = cache.Compile(Spec("[a-z]{" + std::to_string(i + 1) + "}y"));
    if (!snap.ok()) {
      EXPECT_EQ(snap.status().code(), absl::StatusCode::kResourceExhausted);
      EXPECT_THAT(snap.status().message(), HasSubstr("--cache-bytes"));
      ++refused;
      continue;
    }
    IndexInfo info = CompileWait(cache, Spec("[a-z]{" + std::to_string(i + 1) + "}y"));
    ASSERT_EQ(info.state, IndexState::kReady) << info.status;
    info.index->token_index()->WriteMask(info.index->token_index()->start(), row.data());
    largest = std::max<uint64_t>(largest, info.index->MemoryBytes());
    auto lease = cache.Lease(info.id);
    if (!lease.ok()) {
      EXPECT_EQ(lease.status().code(), absl::StatusCode::kResourceExhausted);
      ++refused;
      continue;
    }
    leases.push_back(*lease);
    cache.Maintain();
    // Bytes accounted never pass the budget by more than one index.
    ASSERT_LE(cache.bytes(), o.max_bytes + largest) << "round " << i;
  }
  EXPECT_GT(refused, 0);
  EXPECT_GE(leases.size(), 2u);
  EXPECT_LE(cache.bytes(), o.max_bytes + largest);
  // Sessions closing (leases released) make room again.
  leases.clear();
  IndexInfo again = CompileWait(cache, Spec("[0-9]{2}z"));
  EXPECT_EQ(again.state, IndexState::kReady) << again.status;
  EXPECT_TRUE(cache.Lease(again.id).ok());
}

TEST(IndexCacheTest, LeasedLazyIndexesKeepMasksWithinTheMaskBudget) {
  // What leased lazy indexes grow by as their states are first visited is
  // bounded by --max-mask-bytes across all of them; masks past it are
  // computed at each use and equal the unbounded index's.
  IndexCacheOptions o;
  o.max_mask_bytes = 200000;
  IndexCache cache(o, nullptr);
  std::vector<uint32_t> row((Qwen()->vocabulary().size() + 31) / 32), want(row.size());
  std::vector<std::shared_ptr<IndexLease>> leases;
  std::vector<std::shared_ptr<const TokenIndex>> indexes;
  for (int i = 0; i < 6; ++i) {
    const std::string regex = "[a-z]{" + std::to_string(i + 1) + ",40}[0-9]{3}";
    IndexInfo info = CompileWait(cache, Spec(regex));
    ASSERT_EQ(info.state, IndexState::kReady) << info.status;
    auto lease = cache.Lease(info.id);
    ASSERT_TRUE(lease.ok()) << lease.status();
    leases.push_back(*lease);
    auto free = CompileRegex(regex, Qwen());
    ASSERT_TRUE(free.ok());
    for (Dfa::State s = 1; s < info.index->token_index()->dfa().num_states(); ++s) {
      info.index->token_index()->WriteMask(s, row.data());
      (*free)->WriteMask(s, want.data());
      ASSERT_EQ(row, want) << regex << " state " << s;
    }
    indexes.push_back(info.index->token_index());
  }
  uint64_t kept_states = 0, all_states = 0;
  size_t masks_bytes = 0;
  for (const auto& ix : indexes) {
    kept_states += ix->num_computed_states();
    all_states += ix->dfa().num_states() - 1;
    masks_bytes += ix->MemoryBytes() - ix->dfa().MemoryBytes();
  }
  EXPECT_LT(kept_states, all_states);  // the budget was reached
  // Index bytes beyond the DFAs: the kept masks (<= the budget) plus a
  // pointer per state and the index object itself.
  EXPECT_LE(masks_bytes, o.max_mask_bytes + all_states * sizeof(void*) +
                             indexes.size() * sizeof(TokenIndex));
}

TEST(IndexCacheTest, EagerBuildOverTheMaskBudgetFailsAndIsNotCached) {
  // An eager build needs every mask kept: past the budget it fails with
  // RESOURCE_EXHAUSTED, which says nothing of the constraint (the budget
  // frees as indexes go), so it is not cached like a bad regex is.
  IndexCacheOptions o;
  o.max_mask_bytes = 4096;
  IndexCache cache(o, nullptr);
  for (int i = 0; i < 2; ++i) {
    IndexInfo info = CompileWait(cache, Spec("[a-z]{1,40}", /*eager=*/true));
    ASSERT_EQ(info.state, IndexState::kFailed);
    EXPECT_EQ(info.status.code(), absl::StatusCode::kResourceExhausted) << info.status;
    EXPECT_THAT(info.status.message(), HasSubstr("mask budget"));
    EXPECT_FALSE(info.cache_hit) << "attempt " << i;
  }
  IndexInfo bad = CompileWait(cache, Spec("[a-z"));
  IndexInfo bad_again = CompileWait(cache, Spec("[a-z"));
  EXPECT_EQ(bad.state, IndexState::kFailed);
  EXPECT_TRUE(bad_again.cache_hit);  // a property of the constraint: cached
}

CompileSpec From(const std::string& client, CompileSpec spec) {
  spec.client = client;
  return spec;
}

TEST(IndexCacheTest, CheapCompileDoesNotWaitBehindSlowOnes) {
  // Item 9: two slow compiles held both compile threads while a trivial one
  // waited (up to --compile-timeout).
  IndexCacheOptions o;
  o.compile_threads = 2;
  o.compile_timeout = absl::Seconds(8);
  IndexCache cache(o, nullptr);
  // Each alone takes about 10 s here (8193 DFA states, every mask computed).
  auto a = cache.Compile(From("a", Spec("[a-z]*a[a-z]{12}", /*eager=*/true)));
  auto b = cache.Compile(From("b", Spec("[a-z]*b[a-z]{12}", /*eager=*/true)));
  ASSERT_TRUE(a.ok() && b.ok());
  absl::SleepFor(absl::Milliseconds(300));  // both past the fast lane, on the compile threads
  const absl::Time t0 = absl::Now();
  IndexInfo cheap = CompileWait(cache, From("c", Spec("[0-9]+x")));
  const absl::Duration took = absl::Now() - t0;
  ASSERT_EQ(cheap.state, IndexState::kReady) << cheap.status;
  // The ordering, not a timing: both slow ones were still compiling when the
  // cheap one was done.
  EXPECT_EQ(cache.Get(a->id)->state, IndexState::kCompiling) << "cheap took " << took;
  EXPECT_EQ(cache.Get(b->id)->state, IndexState::kCompiling) << "cheap took " << took;
  EXPECT_TRUE(cache.Cancel(a->id));
  EXPECT_TRUE(cache.Cancel(b->id));
}

TEST(IndexCacheTest, ClientsShareTheQueueRoundRobin) {
  // One client's backlog of slow compiles does not delay another's cheap one
  // by more than one fast-lane turn, and is capped per client.
  IndexCacheOptions o;
  o.compile_threads = 1;
  o.compile_timeout = absl::Seconds(8);
  o.max_pending_per_client = 6;
  IndexCache cache(o, nullptr);
  std::vector<std::string> backlog;
  for (int i = 0; i < 6; ++i) {
    auto e = cache.Compile(From("a", Spec("[a-z]*" + std::string(1, 'k' + i) + "[a-z]{12}", true)));
    ASSERT_TRUE(e.ok()) << e.status();
    backlog.push_back(e->id);
  }
  auto refused = cache.Compile(From("a", Spec("[a-z]*z[a-z]{12}", true)));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("--max-pending-compiles-per-client"));
  IndexInfo cheap = CompileWait(cache, From("c", Spec("[0-9]+y")));
  ASSERT_EQ(cheap.state, IndexState::kReady) << cheap.status;
  int still = 0;
  for (const auto& id : backlog) still += cache.Get(id)->state == IndexState::kCompiling;
  EXPECT_EQ(still, 6);  // none of the backlog finished: the cheap one did not wait for them
  for (const auto& id : backlog) cache.Cancel(id);
}

TEST(IndexCacheTest, DeadlineExceededIsNotCached) {
  // Item 9: a compile with a 1 ms deadline cached DEADLINE_EXCEEDED, and the
  // same request with the default deadline then failed at once.
  IndexCacheOptions o;
  o.failure_ttl = absl::Seconds(60);
  IndexCache cache(o, nullptr);
  CompileSpec spec = Spec("[a-z]{1,500}q", /*eager=*/true);
  spec.timeout = absl::Milliseconds(1);
  IndexInfo a = CompileWait(cache, spec);
  ASSERT_EQ(a.status.code(), absl::StatusCode::kDeadlineExceeded) << a.status;
  spec.timeout = absl::ZeroDuration();
  IndexInfo b = CompileWait(cache, spec);
  EXPECT_FALSE(b.cache_hit);
  EXPECT_EQ(b.state, IndexState::kReady) << b.status;
  EXPECT_EQ(a.id, b.id);
}

TEST(IndexCacheTest, ShortDeadlineDoesNotFailRequestsThatJoinedWithLongerOnes) {
  // A request with a 50 ms deadline starts a ~2 s compilation; an identical
  // request with the default deadline joins it. The first fails with
  // DEADLINE_EXCEEDED; the second is not failed by the first's deadline.
  IndexCache cache({}, nullptr);
  CompileSpec spec = Spec("[a-z]*d[a-z]{10}", /*eager=*/true);
  spec.timeout = absl::Milliseconds(50);
  absl::Notification short_done, long_done;
  IndexInfo short_info, long_info;
  auto a = cache.Compile(spec, [&](const IndexInfo& i) {
    short_info = i;
    short_done.Notify();
  });
  ASSERT_TRUE(a.ok());
  spec.timeout = absl::ZeroDuration();
  auto b = cache.Compile(spec, [&](const IndexInfo& i) {
    long_info = i;
    long_done.Notify();
  });
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->cache_hit);  // joined the same entry
  short_done.WaitForNotification();
  EXPECT_EQ(short_info.status.code(), absl::StatusCode::kDeadlineExceeded) << short_info.status;
  long_done.WaitForNotification();
  EXPECT_EQ(long_info.state, IndexState::kReady) << long_info.status;
  EXPECT_TRUE(long_info.cache_hit);
}

// Issue #24 (4): the last waiter leaving an entry cancels its compilation
// and drops the entry; its callback runs at once with the reason.
TEST(IndexCacheTest, TheLastWaiterLeavingCancelsTheCompile) {
  Metrics metrics("test");
  IndexCacheOptions o;
  o.compile_timeout = absl::Seconds(600);
  IndexCache cache(o, &metrics);
  IndexInfo out;
  int calls = 0;
  // Minutes of work (2^16 states, eager).
  auto snap = cache.Compile(Spec("(a|b)*a(a|b){15}", true), [&](const IndexInfo& i) {
    out = i;
    ++calls;
  });
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->state, IndexState::kCompiling);
  ASSERT_NE(snap->waiter, 0u);
  cache.Leave(snap->id, snap->waiter, absl::DeadlineExceededError("gone"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(out.state, IndexState::kFailed);
  EXPECT_EQ(out.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(cache.Get(snap->id).status().code(), absl::StatusCode::kNotFound);
  cache.Leave(snap->id, snap->waiter, absl::CancelledError("twice"));  // a no-op
  EXPECT_EQ(calls, 1);
  EXPECT_THAT(metrics.Serialize(), HasSubstr("maskd_compiles_abandoned_total 1"));
  // Not cached: the same request starts afresh (and is cancelled here).
  auto again = cache.Compile(Spec("(a|b)*a(a|b){15}", true));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->cache_hit);
  EXPECT_TRUE(cache.Cancel(again->id));
}

// Single-flight stays: an entry runs on while another waiter or a request
// without a callback (wait=false) wants it.
TEST(IndexCacheTest, LeavingSparesEntriesOthersWant) {
  Metrics metrics("test");
  IndexCache cache({}, &metrics);
  CompileSpec spec = Spec("[a-z]*e[a-z]{6}", /*eager=*/true);
  auto first = cache.Compile(spec, [](const IndexInfo&) {});
  ASSERT_TRUE(first.ok());
  absl::Notification done;
  IndexInfo second_info;
  auto second = cache.Compile(spec, [&](const IndexInfo& i) {
    second_info = i;
    done.Notify();
  });
  ASSERT_TRUE(second.ok());
  if (first->state == IndexState::kCompiling) {
    cache.Leave(first->id, first->waiter, absl::CancelledError("gone"));
  }
  if (second->state == IndexState::kCompiling) done.WaitForNotification();
  else second_info = *second;
  EXPECT_EQ(second_info.state, IndexState::kReady) << second_info.status;

  // A wait=false request, then a waiter that leaves: still compiling.
  CompileSpec slow = Spec("(a|b)*b(a|b){15}", true);
  auto background = cache.Compile(slow);
  ASSERT_TRUE(background.ok());
  auto waiter = cache.Compile(slow, [](const IndexInfo&) {});
  ASSERT_TRUE(waiter.ok());
  ASSERT_NE(waiter->waiter, 0u);
  cache.Leave(waiter->id, waiter->waiter, absl::CancelledError("gone"));
  auto still = cache.Get(background->id);
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(still->state, IndexState::kCompiling);
  EXPECT_THAT(metrics.Serialize(), HasSubstr("maskd_compiles_abandoned_total 0"));
  EXPECT_TRUE(cache.Cancel(background->id));
}

// An entry left by its waiters but kept for a wait=false request of another
// client counts from then on against that client's
// --max-pending-compiles-per-client share, no longer the waiters'.
TEST(IndexCacheTest, AnEntryKeptForAWaitFalseRequestMovesToItsClientsShare) {
  IndexCacheOptions options;
  options.max_pending_per_client = 1;
  IndexCache cache(options, nullptr);
  CompileSpec slow = Spec("(a|b)*b(a|b){15}", /*eager=*/true);  // seconds of work
  slow.client = "waiter";
  auto waited = cache.Compile(slow, [](const IndexInfo&) {});
  ASSERT_TRUE(waited.ok()) << waited.status();
  ASSERT_NE(waited->waiter, 0u);
  slow.client = "background";
  ASSERT_TRUE(cache.Compile(slow).ok());  // joins the entry, charged nothing yet
  CompileSpec other = Spec("(a|b)*a(a|b){15}", /*eager=*/true);
  other.client = "waiter";
  EXPECT_EQ(cache.Compile(other).status().code(), absl::StatusCode::kResourceExhausted);
  cache.Leave(waited->id, waited->waiter, absl::CancelledError("gone"));
  auto still = cache.Get(waited->id);
  ASSERT_TRUE(still.ok()) << still.status();
  ASSERT_EQ(still->state, IndexState::kCompiling);
  other.client = "background";
  auto refused = cache.Compile(other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("client background has 1 compilations"));
  other.client = "waiter";
  auto freed = cache.Compile(other);
  EXPECT_TRUE(freed.ok()) << freed.status();
  cache.CancelAll();
}

TEST(IndexCacheTest, DedupesConcurrentRequests) {
  Metrics metrics("test");
  IndexCache cache({}, &metrics);
  std::vector<std::thread> threads;
  std::vector<IndexInfo> out(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { out[i] = CompileWait(cache, Spec("[a-z]{1,100}[0-9]", true)); });
  }
  for (auto& t : threads) t.join();
  int misses = 0;
  for (auto& o : out) {
    EXPECT_EQ(o.state, IndexState::kReady);
    EXPECT_EQ(o.id, out[0].id);
    misses += o.cache_hit ? 0 : 1;
  }
  EXPECT_EQ(misses, 1);
  EXPECT_THAT(metrics.Serialize(), HasSubstr("maskd_compile_seconds_count{kind=\"regex\",result=\"ok\"} 1"));
}

class SessionTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = std::make_unique<IndexCache>(IndexCacheOptions{}, nullptr);
    IndexInfo info = CompileWait(*cache_, Spec("[0-9]{2}"));
    ASSERT_EQ(info.state, IndexState::kReady);
    id_ = info.id;
    row_.resize(info.index->num_words() + 3, 0xFFFFFFFFu);
  }
  std::shared_ptr<IndexLease> Lease() { return *cache_->Lease(id_); }

  std::unique_ptr<IndexCache> cache_;
  std::string id_;
  std::vector<uint32_t> row_;
};

TEST_F(SessionTableTest, StepRollbackForkClose) {
  SessionTableOptions o;
  o.max_sessions = 2;
  SessionTable table(o, nullptr);
  auto s = table.Create(Lease());
  ASSERT_TRUE(s.ok());
  EXPECT_NE((*s)->id(), 0u);
  EXPECT_EQ(table.Find((*s)->id()), *s);
  std::string forced = "junk";
  StepOutcome r = (*s)->Step(0, {}, absl::MakeSpan(row_), &forced);
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE((row_[kOne >> 5] >> (kOne & 31)) & 1);
  EXPECT_EQ(row_.back(), 0u);  // padding words zeroed
  EXPECT_EQ(forced, "");
  const uint32_t one[] = {kOne}, a[] = {kA}, two_a[] = {kTwo, kA};
  r = (*s)->Step(0, one, absl::MakeSpan(row_), nullptr);
  EXPECT_EQ(r.num_tokens, 1u);
  r = (*s)->Step(0, a, absl::MakeSpan(row_), nullptr);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.num_tokens, 1u);
  EXPECT_EQ(row_[0], 0u);
  // Rollback + failing advance: all or nothing.
  r = (*s)->Step(1, two_a, absl::MakeSpan(row_), nullptr);
  EXPECT_FALSE(r.status.ok());
  EXPECT_EQ(r.num_tokens, 1u);
  r = (*s)->Step(2, {}, absl::MakeSpan(row_), nullptr);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
  auto fork = table.Fork((*s)->id());
  ASSERT_TRUE(fork.ok());
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.Create(Lease()).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table.Fork((*s)->id()).status().code(), absl::StatusCode::kResourceExhausted);
  r = (*fork)->Step(0, one, absl::MakeSpan(row_), nullptr);
  EXPECT_TRUE(r.accepting);
  EXPECT_EQ(*(*s)->Rollback(1), 0u);
  EXPECT_EQ((*s)->Rollback(1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(table.Close((*s)->id()).ok());
  EXPECT_EQ(table.Close((*s)->id()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Find((*s)->id()), nullptr);
  EXPECT_EQ(table.size(), 1u);
}

TEST_F(SessionTableTest, ExpireIdle) {
  Metrics metrics("test");
  SessionTableOptions o;
  o.ttl = absl::Seconds(30);
  SessionTable table(o, &metrics);
  auto a = table.Create(Lease());
  auto b = table.Create(Lease());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(table.ExpireIdle(absl::Now()), 0u);
  EXPECT_EQ(table.ExpireIdle(absl::Now() + absl::Seconds(31)), 2u);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_THAT(metrics.Serialize(), HasSubstr("maskd_sessions_expired_total 2"));
  EXPECT_THAT(metrics.Serialize(), HasSubstr("maskd_sessions_active 0"));
}

// Issue #24 finding 3: a client (its key) holds at most
// max_sessions_per_client sessions; past it RESOURCE_EXHAUSTED names the
// share, the flag and the client, and other clients are served. Close,
// expiry and a failed create give the unit back; a fork is charged to the
// caller.
TEST_F(SessionTableTest, SessionsPerClientShare) {
  SessionTableOptions o;
  o.max_sessions = 100;
  o.max_sessions_per_client = 2;
  o.ttl = absl::Seconds(30);
  SessionTable table(o, nullptr);
  auto a1 = table.Create(Lease(), "conn:1");
  auto a2 = table.Create(Lease(), "conn:1");
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto refused = table.Create(Lease(), "conn:1");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("--max-sessions-per-client=2"));
  EXPECT_THAT(refused.status().message(), HasSubstr("client conn:1 holds 2 sessions"));
  auto fork = table.Fork((*a1)->id(), "conn:1");
  EXPECT_EQ(fork.status().code(), absl::StatusCode::kResourceExhausted);
  // Another client is served, forks of conn:1's session included.
  auto b1 = table.Create(Lease(), "conn:2");
  auto b2 = table.Fork((*a1)->id(), "conn:2");
  ASSERT_TRUE(b1.ok() && b2.ok());
  EXPECT_EQ(table.held_by("conn:2"), 2u);
  EXPECT_EQ(table.size(), 4u);
  // Closing gives the unit back.
  const uint64_t closed = (*a1)->id();
  a1->reset();
  ASSERT_TRUE(table.Close(closed).ok());
  EXPECT_EQ(table.held_by("conn:1"), 1u);
  auto a3 = table.Create(Lease(), "conn:1");
  ASSERT_TRUE(a3.ok()) << a3.status();
  // So does expiry.
  a2->reset();
  a3->reset();
  b1->reset();
  b2->reset();
  EXPECT_EQ(table.ExpireIdle(absl::Now() + absl::Seconds(31)), 4u);
  EXPECT_EQ(table.held_by("conn:1"), 0u);
  EXPECT_EQ(table.held_by("conn:2"), 0u);
  EXPECT_TRUE(table.Create(Lease(), "conn:1").ok());
  EXPECT_TRUE(table.Create(Lease(), "conn:1").ok());
}

TEST_F(SessionTableTest, GlobalCapStillAppliesAndGivesTheShareBack) {
  SessionTableOptions o;
  o.max_sessions = 1;
  o.max_sessions_per_client = 5;
  SessionTable table(o, nullptr);
  ASSERT_TRUE(table.Create(Lease(), "a").ok());
  auto full = table.Create(Lease(), "b");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("--max-sessions)"));
  EXPECT_EQ(table.held_by("b"), 0u);  // a refused create holds nothing
}

TEST_F(SessionTableTest, SweeperExpiresUnusedSessions) {
  SessionTableOptions o;
  o.ttl = absl::Milliseconds(100);
  SessionTable table(o, nullptr);
  auto a = table.Create(Lease());
  ASSERT_TRUE(a.ok());
  uint64_t id = (*a)->id();
  a->reset();
  // The sweeper runs on its own; wait for it (bounded), no fixed sleep.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (table.Find(id) != nullptr && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(table.Find(id), nullptr);
}

TEST_F(SessionTableTest, ConcurrentStepsOnOneSession) {
  SessionTable table({}, nullptr);
  auto s = table.Create(Lease());
  ASSERT_TRUE(s.ok());
  // Each thread steps one digit and rolls it back. Steps are serialized:
  // with "[0-9]{2}" a step succeeds unless two digits are already taken (by
  // two other threads), and then fails as a refused token, state unchanged.
  std::atomic<int> ok{0}, refused{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<uint32_t> row(row_.size());
      for (int i = 0; i < 200; ++i) {
        const uint32_t one[] = {kOne};
        StepOutcome r = (*s)->Step(0, one, absl::MakeSpan(row), nullptr);
        if (r.status.ok()) {
          ++ok;
          if (r.num_tokens < 1 || r.num_tokens > 2) ++wrong;
          if (!(*s)->Rollback(1).ok()) ++wrong;
        } else if (r.status.code() == absl::StatusCode::kFailedPrecondition) {
          ++refused;  // a token not allowed now (Guide::Advance)
        } else {
          ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(ok.load() + refused.load(), 800);
  EXPECT_GT(ok.load(), 0);
  // Every accepted step was rolled back: the session is at its start.
  StepOutcome end = (*s)->Step(0, {}, absl::MakeSpan(row_), nullptr);
  ASSERT_TRUE(end.status.ok()) << end.status;
  EXPECT_EQ(end.num_tokens, 0u);
}

// Item 5 of issue #11: ids were splitmix64(counter ^ key), so from one id a
// client derived its neighbours. Ids are now 64 CSPRNG bits.
uint64_t SplitMix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
uint64_t InverseOdd(uint64_t a) {  // a * InverseOdd(a) == 1 mod 2^64
  uint64_t x = a;
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}
uint64_t UnSplitMix(uint64_t x) {
  x ^= x >> 31 ^ x >> 62;
  x *= InverseOdd(0x94d049bb133111ebULL);
  x ^= x >> 27 ^ x >> 54;
  x *= InverseOdd(0xbf58476d1ce4e5b9ULL);
  x ^= x >> 30 ^ x >> 60;
  return x;
}

TEST_F(SessionTableTest, IdsShareNoStructure) {
  ASSERT_EQ(UnSplitMix(SplitMix(12345)), 12345u);
  SessionTableOptions o;
  o.max_sessions = 200000;
  SessionTable table(o, nullptr);
  auto lease = Lease();
  absl::flat_hash_set<uint64_t> seen;
  uint64_t prev = 0, xor_bits = 0, ones = 0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    auto s = table.Create(lease);
    ASSERT_TRUE(s.ok()) << s.status();
    const uint64_t id = (*s)->id();
    ASSERT_NE(id, 0u);
    ASSERT_TRUE(seen.insert(id).second) << "repeated id after " << i;
    ASSERT_FALSE(SessionTable::IsGrammarId(id)) << id;  // a regex session
    const uint64_t random = id >> 1;  // the bits above the kind bit
    if (i > 0) xor_bits += std::popcount(random ^ prev);
    ones += std::popcount(random);
    prev = random;
  }
  // Independent uniform 63-bit words: 31.5 bits differ on average (sd of the
  // mean over 1e5 pairs: 0.013), 31.5 bits set.
  EXPECT_NEAR(static_cast<double>(xor_bits) / (kN - 1), 31.5, 0.25);
  EXPECT_NEAR(static_cast<double>(ones) / kN, 31.5, 0.25);
}

// The step pool routes a batch by its ids' kind bit, before any lookup: it
// must say which sessions are on the grammar route, forks included.
TEST_F(SessionTableTest, IdsSayWhetherTheSessionIsOnTheGrammarRoute) {
  CompileSpec grammar;
  grammar.tokenizer = "qwen3";
  grammar.constraint =
      Constraint::Grammar("start: \"a\"+\n", GrammarFormat::kLark, Qwen());
  IndexInfo info = CompileWait(*cache_, grammar);
  ASSERT_EQ(info.state, IndexState::kReady) << info.status;
  SessionTable table({}, nullptr);
  for (int i = 0; i < 64; ++i) {
    auto g = table.Create(*cache_->Lease(info.id));
    auto r = table.Create(Lease());
    ASSERT_TRUE(g.ok() && r.ok());
    EXPECT_TRUE(SessionTable::IsGrammarId((*g)->id()));
    EXPECT_FALSE(SessionTable::IsGrammarId((*r)->id()));
    auto fork = table.Fork((*g)->id());
    ASSERT_TRUE(fork.ok()) << fork.status();
    EXPECT_TRUE(SessionTable::IsGrammarId((*fork)->id()));
  }
}

TEST_F(SessionTableTest, OneIdDoesNotRevealOthers) {
  // The reproducer: a victim's 40 sessions, an attacker with one session of
  // its own tries the neighbours of its id under every structure the old
  // scheme had (counter ^ key through an invertible mix) and the naive ones.
  SessionTable table({}, nullptr);
  std::vector<uint64_t> victim;
  for (int i = 0; i < 40; ++i) victim.push_back((*table.Create(Lease()))->id());
  const uint64_t mine = (*table.Create(Lease()))->id();
  for (int i = 0; i < 40; ++i) victim.push_back((*table.Create(Lease()))->id());
  const uint64_t u = UnSplitMix(mine);
  int found = 0, tried = 0;
  for (uint64_t d = 1; d <= 4096; ++d) {
    for (uint64_t c : {SplitMix(u ^ d), SplitMix(u + d), SplitMix(u - d), mine ^ d, mine + d,
                       mine - d}) {
      ++tried;
      if (c != mine && table.Find(c) != nullptr) ++found;
    }
  }
  EXPECT_EQ(found, 0) << "of " << tried << " guesses";
  for (uint64_t id : victim) EXPECT_NE(table.Find(id), nullptr);
}

TEST_F(SessionTableTest, RollbackWindowBoundsHistory) {
  // Item 8a: history was 4 bytes per token without a cap. "[0-9]{2}" ends
  // after two digits, so use an index that takes any number of digits.
  IndexInfo info = CompileWait(*cache_, Spec("[0-9]*"));
  ASSERT_EQ(info.state, IndexState::kReady);
  SessionTableOptions o;
  o.rollback_window = 64;
  SessionTable table(o, nullptr);
  auto s = table.Create(*cache_->Lease(info.id));
  ASSERT_TRUE(s.ok());
  std::vector<uint32_t> row(info.index->num_words());
  const uint32_t one[] = {kOne};
  for (int i = 0; i < 100000; ++i) {
    StepOutcome r = (*s)->Step(0, one, absl::MakeSpan(row), nullptr);
    ASSERT_TRUE(r.status.ok()) << r.status;
  }
  EXPECT_EQ(table.Find((*s)->id())->history_bytes(), 64u * 4);  // not 400 kB
  // Within the window: fine, and all or nothing with a rollback.
  StepOutcome r = (*s)->Step(64, {}, absl::MakeSpan(row), nullptr);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.num_tokens, 100000u - 64);
  // Past what is left of the window: OUT_OF_RANGE, nothing changed.
  r = (*s)->Step(1, one, absl::MakeSpan(row), nullptr);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kOutOfRange) << r.status;
  EXPECT_THAT(r.status.message(), HasSubstr("rollback window of 64"));
  EXPECT_EQ(r.num_tokens, 100000u - 64);
  EXPECT_EQ((*s)->Rollback(1).status().code(), absl::StatusCode::kOutOfRange);
  // More than was ever accepted stays INVALID_ARGUMENT.
  EXPECT_EQ((*s)->Rollback(200000).status().code(), absl::StatusCode::kInvalidArgument);
  // Advancing refills the window; a fork keeps it.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*s)->Step(0, one, absl::MakeSpan(row), nullptr).status.ok());
  }
  auto f = table.Fork((*s)->id());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*(*f)->Rollback(10), 100000u - 64);
  EXPECT_EQ((*f)->Rollback(1).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(GuideTest, RingKeepsExactlyTheWindow) {
  IndexCache cache({}, nullptr);
  IndexInfo info = CompileWait(cache, Spec("[0-9]*(a[0-9]*)?"));
  ASSERT_EQ(info.state, IndexState::kReady);
  // A long random walk with rollbacks on a bounded guide and an unbounded
  // reference: same states throughout; a rollback is accepted exactly when
  // it is within the model's count min(window, tokens since ...).
  for (size_t window : {size_t{0}, size_t{1}, size_t{5}, size_t{37}}) {
    Guide full(info.index->token_index()), ring(info.index->token_index(), window);
    uint64_t x = 88172645463325252ull;
    size_t avail = 0;
    int refused = 0;
    for (int i = 0; i < 3000; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      if (x % 4 == 0) {
        size_t n = (x >> 8) % 12;
        absl::Status b = ring.Rollback(n);
        ASSERT_EQ(b.ok(), n <= avail) << b << " window " << window;
        if (b.ok()) {
          ASSERT_TRUE(full.Rollback(n).ok());
          avail -= n;
        } else {
          // Past the start: InvalidArgument; within it but past the window:
          // OutOfRange.
          ASSERT_EQ(b.code(), n > full.num_tokens() ? absl::StatusCode::kInvalidArgument
                                                    : absl::StatusCode::kOutOfRange);
          ++refused;
        }
      } else {
        const uint32_t t[] = {(x >> 8) % 7 == 0 ? kA : kOne};
        absl::Status a = full.Advance(t), b = ring.Advance(t);
        ASSERT_EQ(a.ok(), b.ok());
        if (b.ok()) avail = std::min(window, avail + 1);
      }
      ASSERT_EQ(full.state(), ring.state());
      ASSERT_EQ(full.num_tokens(), ring.num_tokens());
      ASSERT_EQ(ring.rollback_available(), avail);
      ASSERT_LE(ring.history_bytes(), std::max<size_t>(window, 16) * 4);
    }
    EXPECT_GT(refused, 0);
  }
}

TEST(MetricsTest, ExpositionNamesAndUnits) {
  Metrics m("1.2.3");
  m.ObserveStep(25e-6, 64);
  m.ObserveStep(1e-3, 1);
  m.TokensAdvanced(65);
  m.RpcError("Step", 8);
  m.StepEntryError(5);
  m.ObserveCompile(0.01, "regex", "ok");
  m.SetCacheBytes(1234);
  std::string text = m.Serialize();
  EXPECT_THAT(text, HasSubstr("maskd_build_info{version=\"1.2.3\"} 1"));
  EXPECT_THAT(text, HasSubstr("maskd_step_seconds_count 2"));
  EXPECT_THAT(text, HasSubstr("maskd_step_seconds_bucket{le=\"5e-05\"} 1"));
  EXPECT_THAT(text, HasSubstr("maskd_step_batch_size_sum 65"));
  EXPECT_THAT(text, HasSubstr("maskd_tokens_advanced_total 65"));
  EXPECT_THAT(text, HasSubstr("maskd_rpc_errors_total{code=\"RESOURCE_EXHAUSTED\",method=\"Step\"} 1"));
  EXPECT_THAT(text, HasSubstr("maskd_step_entry_errors_total{code=\"NOT_FOUND\"} 1"));
  EXPECT_THAT(text, HasSubstr("maskd_index_cache_bytes 1234"));
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(99), "UNKNOWN");
}

}  // namespace
}  // namespace maskd
