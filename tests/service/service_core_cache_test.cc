// Unit tests of the gRPC-free service classes, part 2: IndexCache (ids, hits,
// failure cache and expiry, deadline, cancel, pending caps, LRU eviction with
// leases, the mask budget, dedup, the compile queue's fairness). Bundled qwen3
// tokenizer only.
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
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
#include "tests/service/service_core_test_util.h"

namespace maskd {
namespace {

using ::testing::HasSubstr;
using ::maskd::service_core_test::Qwen;
using ::maskd::service_core_test::Spec;
using ::maskd::service_core_test::CompileWait;

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

// Running totals the cache polls from elsewhere (terminal DFAs built and
// shared, masks not kept) are counters that follow the total.
TEST(IndexCacheTest, PolledTotalsAreCounters) {
  Metrics metrics("test");
  metrics.SetTerminalDfas(100, 3, 1);
  metrics.SetTerminalDfas(100, 5, 1);
  metrics.SetMaskBudget(10, 7);
  const std::string m = metrics.Serialize();
  EXPECT_THAT(m, HasSubstr("# TYPE maskd_terminal_dfas_built_total counter"));
  EXPECT_THAT(m, HasSubstr("maskd_terminal_dfas_built_total 5"));
  EXPECT_THAT(m, HasSubstr("maskd_terminal_dfas_shared_total 1"));
  EXPECT_THAT(m, HasSubstr("# TYPE maskd_index_masks_unkept_total counter"));
  EXPECT_THAT(m, HasSubstr("maskd_index_masks_unkept_total 7"));
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
  EXPECT_TRUE((*lease)->index()->token_index()->WriteMask((*lease)->index()->token_index()->start(), row.data()).ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    IndexInfo info = CompileWait(cache, Spec("[a-z]{" + std::to_string(i + 1) + "}x"));
    ASSERT_EQ(info.state, IndexState::kReady) << info.status;
    EXPECT_TRUE(info.index->token_index()->WriteMask(info.index->token_index()->start(), row.data()).ok());  // grows the index
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
    EXPECT_TRUE(info.index->token_index()->WriteMask(info.index->token_index()->start(), row.data()).ok());
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
    EXPECT_TRUE(info.index->token_index()->WriteMask(info.index->token_index()->start(), row.data()).ok());
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
    CompileSpec spec = Spec(regex);
    spec.constraint.options.eager_dfa = true;  // states numbered as CompileRegex's
    IndexInfo info = CompileWait(cache, spec);
    ASSERT_EQ(info.state, IndexState::kReady) << info.status;
    auto lease = cache.Lease(info.id);
    ASSERT_TRUE(lease.ok()) << lease.status();
    leases.push_back(*lease);
    auto free = CompileRegex(regex, Qwen());
    ASSERT_TRUE(free.ok());
    for (Dfa::State s = 1; s < info.index->token_index()->dfa().num_states(); ++s) {
      EXPECT_TRUE(info.index->token_index()->WriteMask(s, row.data()).ok());
      EXPECT_TRUE((*free)->WriteMask(s, want.data()).ok());
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
  // pointer per state (in chunks that at most double, the first of 16) and
  // the index object itself.
  EXPECT_LE(masks_bytes, o.max_mask_bytes + 2 * (all_states + 16 * indexes.size()) * sizeof(void*) +
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

// This process's threads by name: name -> the nice value of each (Linux:
// /proc/self/task/<tid>/comm and field 19 of .../stat).
std::multimap<std::string, int> ThreadsByName() {
  std::multimap<std::string, int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm"), stat(task.path() / "stat");
    std::string name, line;
    if (!std::getline(comm, name) || !std::getline(stat, line)) continue;  // exited
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i) {}  // field 19: nice
    out.emplace(name, std::stoi(field));
  }
  return out;
}

// The compile threads and the fast lane are named (what `top -H` shows) and
// run --compile-nice below the rest of the process, so that compilations
// yield the CPU to steps and masks.
TEST(IndexCacheTest, CompileThreadsAreNamedAndRunAtLowerPriority) {
  const int base = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  IndexCacheOptions o;
  o.compile_threads = 2;
  o.compile_nice = 3;
  IndexCache cache(o, nullptr);
  std::multimap<std::string, int> threads;
  for (int i = 0; i < 5000; ++i) {  // the threads name themselves as they start
    threads = ThreadsByName();
    if (threads.count("maskd-compile") == 2 && threads.count("maskd-fastlane") == 1) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(threads.count("maskd-compile"), 2u);
  ASSERT_EQ(threads.count("maskd-fastlane"), 1u);
  for (const char* name : {"maskd-compile", "maskd-fastlane"}) {
    auto [from, to] = threads.equal_range(name);
    for (auto it = from; it != to; ++it) EXPECT_EQ(it->second, std::min(base + 3, 19)) << name;
  }
  EXPECT_EQ(CompileWait(cache, Spec("[0-9]+x")).state, IndexState::kReady);
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

// Issue #24 (the hostile mix): two clients at their fixed share must not fill
// --max-pending-compiles for a third. With 6 slots and a fixed share of 3,
// the second client may hold 6 / 3 = 2 while the first holds compilations,
// and the third still gets a slot.
TEST(IndexCacheTest, TwoFloodingClientsLeaveRoomForAThird) {
  IndexCacheOptions o;
  o.compile_threads = 1;
  o.compile_timeout = absl::Seconds(30);
  o.max_pending = 6;
  o.max_pending_per_client = 3;
  IndexCache cache(o, nullptr);
  std::vector<std::string> held;
  int n = 0;
  auto slow = [&](const char* client) {
    return cache.Compile(From(client, Spec("[a-z]*" + std::to_string(n++) + "[a-z]{12}", true)));
  };
  for (int i = 0; i < 3; ++i) {
    auto e = slow("a");
    ASSERT_TRUE(e.ok()) << e.status();
    held.push_back(e->id);
  }
  for (int i = 0; i < 2; ++i) {
    auto e = slow("b");
    ASSERT_TRUE(e.ok()) << e.status();
    held.push_back(e->id);
  }
  auto refused = slow("b");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("client b has 2 compilations in progress, its fair share while 2 clients "
                        "hold compilations (--max-pending-compiles=6 / 3"));
  auto third = slow("c");  // before the rule: refused, all 6 slots taken by a and b
  ASSERT_TRUE(third.ok()) << third.status();
  held.push_back(third->id);
  EXPECT_EQ(slow("c").status().code(), absl::StatusCode::kResourceExhausted);  // now full
  for (const auto& id : held) cache.Cancel(id);
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

}  // namespace
}  // namespace maskd
