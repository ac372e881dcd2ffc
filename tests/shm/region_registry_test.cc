#include "shm/region_registry.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "shm/cuda_export.h"
#include "shm/fault_guard.h"
#include "shm/posix_segment.h"

namespace maskd::shm {
namespace {

using absl::StatusCode;

std::string Key(const std::string& tag) {
  return "/maskd-test-" + std::to_string(getpid()) + "-" + tag;
}

RegionRegistry::Options Enabled(std::vector<std::string>* log = nullptr) {
  RegionRegistry::Options o;
  o.allow_registration = true;
  o.key_prefix = "/maskd-";
  if (log != nullptr) {
    o.log = [log](std::string_view m) { log->emplace_back(m); };
  } else {
    o.log = [](std::string_view) {};
  }
  return o;
}

// True when /proc/self/maps shows a mapping of shared-memory object `key`.
bool IsMapped(const std::string& key) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/dev/shm" + key) != std::string::npos) return true;
  }
  return false;
}

PosixShmSegment MakeSegment(const std::string& key, size_t size) {
  auto seg = PosixShmSegment::Create(key, size);
  EXPECT_TRUE(seg.ok()) << seg.status();
  return std::move(seg).value();
}

TEST(RegionRegistry, RegistrationDisabledByDefault) {
  RegionRegistry reg;  // default options
  PosixShmSegment seg = MakeSegment(Key("disabled"), 4096);
  absl::Status s = reg.RegisterSystem("r", seg.key(), 0, 4096);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(reg.RegisterCuda("c", std::string(64, 'x'), 0, 0, 16).code(),
            StatusCode::kFailedPrecondition);
}

TEST(RegionRegistry, SystemRegionMapsTheRightBytes) {
  RegionRegistry reg(Enabled());
  PosixShmSegment seg = MakeSegment(Key("bytes"), 3 * 4096);
  auto* p = static_cast<uint8_t*>(seg.data());
  for (size_t i = 0; i < seg.size(); ++i) p[i] = static_cast<uint8_t>(i * 7);
  // Unaligned offset: the registry maps from the page below.
  ASSERT_TRUE(reg.RegisterSystem("logits", seg.key(), 4100, 5000).ok());
  auto lease = reg.Acquire("logits");
  ASSERT_TRUE(lease.ok()) << lease.status();
  const RegionLease r = *lease;
  EXPECT_EQ(r->kind(), RegionKind::kSystem);
  EXPECT_EQ(r->byte_size(), 5000u);
  EXPECT_EQ(r->device_id(), -1);
  EXPECT_EQ(std::memcmp(r->data(), p + 4100, 5000), 0);
  // Writes go both ways (MAP_SHARED).
  static_cast<uint8_t*>(r->data())[0] = 0xAB;
  EXPECT_EQ(p[4100], 0xAB);
  p[4101] = 0xCD;
  EXPECT_EQ(static_cast<uint8_t*>(r->data())[1], 0xCD);
}

TEST(RegionRegistry, BadKeys) {
  std::vector<std::string> log;
  RegionRegistry reg(Enabled(&log));
  EXPECT_EQ(reg.RegisterSystem("a", "", 0, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.RegisterSystem("a", "maskd-x", 0, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.RegisterSystem("a", "/maskd-a/b", 0, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.RegisterSystem("a", "/maskd-..", 0, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.RegisterSystem("a", "/" + std::string(300, 'm'), 0, 8).code(),
            StatusCode::kInvalidArgument);
  // Outside the configured prefix, even when the object exists.
  PosixShmSegment other = MakeSegment("/otherapp-" + std::to_string(getpid()), 4096);
  absl::Status s = reg.RegisterSystem("a", other.key(), 0, 8);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s;
  EXPECT_NE(std::string(s.message()).find("/maskd-"), std::string::npos);
  // Inside the prefix but missing: NotFound, with no server path in the text.
  s = reg.RegisterSystem("a", Key("missing"), 0, 8);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_EQ(std::string(s.message()).find("/dev/shm"), std::string::npos);
  EXPECT_EQ(std::string(s.message()).find("No such file"), std::string::npos);
  EXPECT_NE(std::string(s.message()).find(Key("missing")), std::string::npos) << s;
  // A client's mistake is its status, not a server error in the log.
  EXPECT_TRUE(log.empty()) << log.front();
}

TEST(RegionRegistry, BadNames) {
  RegionRegistry reg(Enabled());
  PosixShmSegment seg = MakeSegment(Key("names"), 4096);
  EXPECT_EQ(reg.RegisterSystem("", seg.key(), 0, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.RegisterSystem(std::string(129, 'n'), seg.key(), 0, 8).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.RegisterSystem("a\nb", seg.key(), 0, 8).code(), StatusCode::kInvalidArgument);
}

TEST(RegionRegistry, BoundsAndOverflow) {
  RegionRegistry reg(Enabled());
  PosixShmSegment seg = MakeSegment(Key("bounds"), 8192);
  EXPECT_EQ(reg.RegisterSystem("a", seg.key(), 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.RegisterSystem("a", seg.key(), 0, 8193).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(reg.RegisterSystem("a", seg.key(), 8192, 1).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(reg.RegisterSystem("a", seg.key(), 4096, 4097).code(), StatusCode::kOutOfRange);
  // offset + size wraps around 2^64.
  EXPECT_EQ(reg.RegisterSystem("a", seg.key(), UINT64_MAX - 10, 100).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.RegisterSystem("a", seg.key(), 100, UINT64_MAX).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.RegisterCuda("c", std::string(64, 'x'), 0, UINT64_MAX, 2).code(),
            StatusCode::kInvalidArgument);
  // Exactly the whole object is fine.
  ASSERT_TRUE(reg.RegisterSystem("a", seg.key(), 0, 8192).ok());
  auto r = reg.Acquire("a");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)->CheckRange(0, 8192).ok());
  EXPECT_TRUE((*r)->CheckRange(8192, 0).ok());
  EXPECT_EQ((*r)->CheckRange(8000, 193).code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*r)->CheckRange(UINT64_MAX, 2).code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*r)->CheckRange(2, UINT64_MAX).code(), StatusCode::kOutOfRange);
  auto at = (*r)->At(100, 8);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(*at, static_cast<char*>((*r)->data()) + 100);
  EXPECT_EQ((*r)->At(8190, 8).status().code(), StatusCode::kOutOfRange);
}

TEST(RegionRegistry, DuplicateAndUnknownNames) {
  RegionRegistry reg(Enabled());
  PosixShmSegment seg = MakeSegment(Key("dup"), 4096);
  ASSERT_TRUE(reg.RegisterSystem("x", seg.key(), 0, 64).ok());
  EXPECT_EQ(reg.RegisterSystem("x", seg.key(), 64, 64).code(), StatusCode::kAlreadyExists);
  // One name space for both kinds.
  EXPECT_EQ(reg.RegisterCuda("x", std::string(64, 'h'), 0, 0, 64).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(reg.Acquire("y").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reg.Unregister("y").code(), StatusCode::kNotFound);
  EXPECT_EQ(reg.List("y").status().code(), StatusCode::kNotFound);
}

TEST(RegionRegistry, CudaHandleLengthCheckedOnEveryBuild) {
  RegionRegistry reg(Enabled());
  for (size_t n : {0u, 63u, 65u, 128u}) {
    absl::Status s = reg.RegisterCuda("c", std::string(n, '\x01'), 0, 0, 16);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << n << " " << s;
    EXPECT_NE(std::string(s.message()).find("64 bytes"), std::string::npos) << s;
  }
  EXPECT_EQ(reg.RegisterCuda("c", std::string(64, '\x01'), -1, 0, 16).code(),
            StatusCode::kInvalidArgument);
  // A well-formed but bogus handle: no CUDA build -> Unimplemented; no GPU ->
  // Unavailable; a GPU -> the driver rejects it -> InvalidArgument.
  absl::Status s = reg.RegisterCuda("c", std::string(64, '\x01'), 0, 0, 16);
  EXPECT_TRUE(s.code() == StatusCode::kUnimplemented ||
              s.code() == StatusCode::kUnavailable ||
              s.code() == StatusCode::kInvalidArgument)
      << s;
  // No CUDA internals in the client-visible text.
  EXPECT_EQ(std::string(s.message()).find("cudaError"), std::string::npos) << s;
  EXPECT_EQ(std::string(s.message()).find("CUDA_ERROR"), std::string::npos) << s;
  EXPECT_TRUE(reg.List()->empty());
#ifndef MASKD_SHM_HAVE_CUDA
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(ExportCudaIpcHandle(&s).status().code(), StatusCode::kUnimplemented);
#endif
}

TEST(RegionRegistry, UnregisterWhileInUseKeepsMappingUntilRelease) {
  RegionRegistry reg(Enabled());
  PosixShmSegment seg = MakeSegment(Key("inuse"), 4096);
  std::memset(seg.data(), 0x11, 4096);
  ASSERT_TRUE(reg.RegisterSystem("step", seg.key(), 0, 4096).ok());
  RegionLease lease = *reg.Acquire("step");
  {
    auto list = reg.List();
    ASSERT_TRUE(list.ok());
    ASSERT_EQ(list->size(), 1u);
    EXPECT_EQ((*list)[0].lease_count, 1);
  }
  ASSERT_TRUE(reg.Unregister("step").ok());
  EXPECT_EQ(reg.Acquire("step").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(reg.List()->empty());
  // Still mapped: read and write through the lease.
  EXPECT_TRUE(IsMapped(seg.key()));
  auto* d = static_cast<uint8_t*>(lease->data());
  EXPECT_EQ(d[4095], 0x11);
  d[10] = 0x22;
  EXPECT_EQ(static_cast<uint8_t*>(seg.data())[10], 0x22);
  // The name is free again while the old mapping lives on.
  ASSERT_TRUE(reg.RegisterSystem("step", seg.key(), 0, 128).ok());
  EXPECT_EQ((*reg.Acquire("step"))->byte_size(), 128u);
  ASSERT_TRUE(reg.Unregister("step").ok());
  // Last user releases: unmapped now. (The client's own mapping is the
  // segment's; unmap it first so /proc/self/maps shows only the registry's.)
  const std::string key = seg.key();
  std::vector<uint8_t> keep(static_cast<uint8_t*>(seg.data()),
                            static_cast<uint8_t*>(seg.data()) + 16);
  seg.Reset();
  EXPECT_TRUE(IsMapped(key));  // still the lease's mapping
  EXPECT_EQ(d[10], 0x22);
  lease.reset();
  EXPECT_FALSE(IsMapped(key));
}

TEST(RegionRegistry, UnregisterAllAndList) {
  RegionRegistry reg(Enabled());
  PosixShmSegment seg = MakeSegment(Key("all"), 4096);
  ASSERT_TRUE(reg.RegisterSystem("b", seg.key(), 0, 100).ok());
  ASSERT_TRUE(reg.RegisterSystem("a", seg.key(), 100, 200).ok());
  auto list = reg.List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "a");
  EXPECT_EQ((*list)[0].byte_size, 200u);
  EXPECT_EQ((*list)[1].name, "b");
  EXPECT_EQ((*list)[1].kind, RegionKind::kSystem);
  EXPECT_STREQ(RegionKindName((*list)[1].kind), "system");
  auto one = reg.List("b");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  RegionLease held = *reg.Acquire("a");
  ASSERT_TRUE(reg.Unregister("").ok());
  EXPECT_TRUE(reg.List()->empty());
  EXPECT_TRUE(reg.Unregister("").ok());  // empty registry: still OK
  EXPECT_EQ(held->byte_size(), 200u);
  static_cast<char*>(held->data())[0] = 'z';
  EXPECT_EQ(static_cast<char*>(seg.data())[100], 'z');
}

TEST(RegionRegistry, MaxRegions) {
  RegionRegistry::Options o = Enabled();
  o.max_regions = 2;
  RegionRegistry reg(o);
  PosixShmSegment seg = MakeSegment(Key("max"), 4096);
  ASSERT_TRUE(reg.RegisterSystem("1", seg.key(), 0, 1).ok());
  ASSERT_TRUE(reg.RegisterSystem("2", seg.key(), 0, 1).ok());
  EXPECT_EQ(reg.RegisterSystem("3", seg.key(), 0, 1).code(), StatusCode::kResourceExhausted);
}

TEST(RegionRegistry, ClientUnmapsAndRecreatesRegion) {
  RegionRegistry reg(Enabled());
  const std::string key = Key("recreate");
  PosixShmSegment seg = MakeSegment(key, 4096);
  std::memset(seg.data(), 'A', 4096);
  ASSERT_TRUE(reg.RegisterSystem("r", key, 0, 4096).ok());
  EXPECT_EQ(static_cast<char*>((*reg.Acquire("r"))->data())[5], 'A');
  // Client tears down: unregister, unmap + unlink.
  ASSERT_TRUE(reg.Unregister("r").ok());
  seg.Reset();
  EXPECT_FALSE(seg.valid());
  EXPECT_EQ(reg.RegisterSystem("r", key, 0, 4096).code(), StatusCode::kNotFound);
  // ... and re-creates it, larger, with new contents.
  seg = MakeSegment(key, 8192);
  std::memset(seg.data(), 'B', 8192);
  ASSERT_TRUE(reg.RegisterSystem("r", key, 0, 8192).ok());
  RegionLease r = *reg.Acquire("r");
  EXPECT_EQ(static_cast<char*>(r->data())[8191], 'B');
}

TEST(PosixShmSegment, CreateErrorsAndMove) {
  const std::string key = Key("seg");
  EXPECT_EQ(PosixShmSegment::Create("noslash", 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PosixShmSegment::Create(key, 0).status().code(), StatusCode::kInvalidArgument);
  PosixShmSegment a = MakeSegment(key, 100);
  EXPECT_EQ(PosixShmSegment::Create(key, 100).status().code(), StatusCode::kAlreadyExists);
  PosixShmSegment b = std::move(a);
  EXPECT_FALSE(a.valid());
  EXPECT_TRUE(b.valid());
  EXPECT_EQ(b.size(), 100u);
  b = PosixShmSegment();
  // Unlinked: the key can be created again.
  EXPECT_TRUE(PosixShmSegment::Create(key, 100).ok());
}

TEST(RegionRegistry, ConcurrentAcquireAndUnregister) {
  RegionRegistry reg(Enabled());
  PosixShmSegment seg = MakeSegment(Key("race"), 4096);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> acquired{0}, zero_reads{0}, other_errors{0};
  std::vector<std::thread> users;
  for (int t = 0; t < 3; ++t) {
    users.emplace_back([&] {
      while (!stop.load()) {
        auto l = reg.Acquire("hot");
        if (!l.ok()) {
          if (l.status().code() != StatusCode::kNotFound) ++other_errors;
          continue;
        }
        ++acquired;
        // A lease keeps the mapping alive after Unregister: the read sees
        // the segment's bytes (zero), never an unmapped page (ASan/SIGSEGV).
        zero_reads += static_cast<volatile char*>((*l)->data())[4095] == 0 ? 1 : 0;
      }
    });
  }
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(reg.RegisterSystem("hot", seg.key(), 0, 4096).ok());
    // Hold the region until some user has leased it at least once.
    if (i == 0) {
      while (acquired.load() == 0) std::this_thread::yield();
    }
    ASSERT_TRUE(reg.Unregister("hot").ok());
  }
  stop = true;
  for (auto& t : users) t.join();
  EXPECT_GT(acquired.load(), 0);
  EXPECT_EQ(zero_reads.load(), acquired.load());
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_EQ(reg.Acquire("hot").status().code(), StatusCode::kNotFound);
  auto left = reg.List();
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
}

// Shrinks shared-memory object `key` to `size` bytes, as a client may at any
// time.
void Shrink(const std::string& key, off_t size) {
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0) << key;
  ASSERT_EQ(ftruncate(fd, size), 0);
  close(fd);
}

// Issue #11 item 2: a client shrank its object under the server's mapping and
// the next access killed the server with SIGBUS. Now the size is re-checked
// before each use, and an access that races the check becomes a flag.
TEST(RegionRegistry, ShrunkObjectIsAnErrorNotACrash) {
  RegionRegistry reg(Enabled());
  const std::string key = Key("shrink");
  PosixShmSegment seg = MakeSegment(key, 3 * 4096);
  ASSERT_TRUE(reg.RegisterSystem("r", key, 100, 3 * 4096 - 100).ok());
  RegionLease r = *reg.Acquire("r");
  EXPECT_TRUE(r->CheckBacked().ok());
  EXPECT_TRUE(r->CheckNotFaulted().ok());
  const uint64_t faults_before = FaultGuard::TotalFaults();

  Shrink(key, 4096);  // the region's last two pages are gone
  absl::Status s = r->CheckBacked();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(std::string(s.message()).find("\"r\""), std::string::npos) << s;
  EXPECT_NE(std::string(s.message()).find("4096"), std::string::npos) << s;
  EXPECT_TRUE(r->CheckNotFaulted().ok());  // nothing touched yet

  // The race the check cannot close: touch the region anyway. Before the
  // fault guard this write killed the process with SIGBUS.
  volatile char* p = static_cast<volatile char*>(r->data());
  p[0] = 'x';                      // first page: still backed
  p[3 * 4096 - 101] = 'y';         // last page: past the object's end
  EXPECT_EQ(p[3 * 4096 - 101], 'y');  // completes, on a private page
  EXPECT_EQ(FaultGuard::TotalFaults(), faults_before + 1);
  s = r->CheckNotFaulted();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_NE(std::string(s.message()).find("\"r\""), std::string::npos) << s;

  // Sticky: even grown back, the region stays unusable (its pages are no
  // longer the object's) until it is registered again.
  Shrink(key, 3 * 4096);
  EXPECT_EQ(r->CheckBacked().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(reg.Unregister("r").ok());
  r.reset();
  ASSERT_TRUE(reg.RegisterSystem("r", key, 0, 3 * 4096).ok());
  RegionLease again = *reg.Acquire("r");
  EXPECT_TRUE(again->CheckBacked().ok());
  static_cast<volatile char*>(again->data())[3 * 4096 - 1] = 'z';
  EXPECT_TRUE(again->CheckNotFaulted().ok());
  EXPECT_EQ(static_cast<char*>(seg.data())[3 * 4096 - 1], 'z');  // shared again
}

// Shrinks racing writers on other threads: every round ends with the writers
// alive, and a writer that saw OK from both checks wrote into real pages.
TEST(RegionRegistry, ShrinkDuringWritesFromOtherThreads) {
  RegionRegistry reg(Enabled());
  constexpr size_t kBytes = 16 * 4096;
  int64_t faulted_rounds = 0;
  for (int round = 0; round < 20; ++round) {
    const std::string key = Key("race-shrink-" + std::to_string(round));
    PosixShmSegment seg = MakeSegment(key, kBytes);
    ASSERT_TRUE(reg.RegisterSystem("w", key, 0, kBytes).ok());
    std::atomic<bool> stop{false};
    std::atomic<int64_t> ok{0}, refused{0}, lost{0};
    std::vector<std::thread> writers;
    for (int t = 0; t < 3; ++t) {
      writers.emplace_back([&] {
        while (!stop.load()) {
          RegionLease l = *reg.Acquire("w");
          if (!l->CheckBacked().ok()) {
            ++refused;
            continue;
          }
          std::memset(l->data(), 0x5A, kBytes);
          if (l->CheckNotFaulted().ok()) {
            ++ok;
          } else {
            ++lost;
          }
        }
      });
    }
    while (ok.load() < 10) std::this_thread::yield();
    Shrink(key, 0);
    while (refused.load() < 10) std::this_thread::yield();
    stop = true;
    for (auto& t : writers) t.join();
    EXPECT_GT(ok.load(), 0);
    EXPECT_GT(refused.load(), 0);
    faulted_rounds += lost.load() > 0 ? 1 : 0;
    ASSERT_TRUE(reg.Unregister("w").ok());
  }
  // Whether a write faulted mid-copy depends on timing; the assertions above
  // (some writes before, refusals after, no crash) hold in every round.
  RecordProperty("rounds_with_a_write_fault", faulted_rounds);
}

// Death by SIGBUS; under AddressSanitizer, whose own SIGBUS handler reports
// the fault and then aborts (abort_on_error), death by SIGABRT after it.
bool KilledByBusError(int status) {
#if defined(__SANITIZE_ADDRESS__)
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) return true;
#endif
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
}

// The guard only covers registered mappings: any other SIGBUS keeps its
// default, fatal, behaviour.
TEST(FaultGuardDeathTest, OtherSigbusStaysFatal) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  RegionRegistry reg(Enabled());
  PosixShmSegment seg = MakeSegment(Key("guarded"), 4096);
  ASSERT_TRUE(reg.RegisterSystem("g", seg.key(), 0, 4096).ok());  // handler installed
  PosixShmSegment plain = MakeSegment(Key("unguarded"), 2 * 4096);
  EXPECT_EXIT(
      {
        Shrink(plain.key(), 0);
        static_cast<volatile char*>(plain.data())[4096] = 1;
      },
      KilledByBusError, "");
  EXPECT_EXIT(raise(SIGBUS), KilledByBusError, "");
}

TEST(FaultGuard, ArgumentsAndSlots) {
  EXPECT_EQ(FaultGuard::Watch(nullptr, 4096).status().code(), StatusCode::kInvalidArgument);
  void* p = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(FaultGuard::Watch(static_cast<char*>(p) + 1, 10).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(FaultGuard::Watch(p, 0).status().code(), StatusCode::kInvalidArgument);
  std::vector<std::unique_ptr<FaultGuard>> all;
  for (;;) {
    auto g = FaultGuard::Watch(p, 8192);
    if (!g.ok()) {
      EXPECT_EQ(g.status().code(), StatusCode::kResourceExhausted) << g.status();
      break;
    }
    all.push_back(*std::move(g));
    ASSERT_LE(all.size(), FaultGuard::kMaxWatched);
  }
  EXPECT_GT(all.size(), FaultGuard::kMaxWatched - 8);
  all.clear();  // slots are reusable
  EXPECT_TRUE(FaultGuard::Watch(p, 8192).ok());
  munmap(p, 8192);
}

// Issue #11 item 3: the registry mapped and wrote objects other users own;
// only the key prefix was checked.
TEST(RegionRegistry, RefusesObjectsTheCallerDoesNotOwn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give an object to uid 65534";
  std::vector<std::string> log;
  RegionRegistry reg(Enabled(&log));
  const std::string key = Key("owner");
  PosixShmSegment seg = MakeSegment(key, 4096);  // mode 0600
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchown(fd, 65534, 65534), 0);
  close(fd);
  // Default caller: the server's own uid (root): refused.
  absl::Status s = reg.RegisterSystem("r", key, 0, 4096);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s;
  EXPECT_NE(std::string(s.message()).find(key), std::string::npos) << s;
  EXPECT_NE(std::string(s.message()).find("65534"), std::string::npos) << s;
  s = reg.RegisterSystem("r", key, 0, 4096, uid_t{0});
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s;
  s = reg.RegisterSystem("r", key, 0, 4096, uid_t{1000});
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s;
  // The owner may; the region is then the owner's.
  EXPECT_TRUE(reg.RegisterSystem("r", key, 0, 4096, uid_t{65534}).ok());
  EXPECT_EQ((*reg.Acquire("r"))->owner_uid(), 65534u);
  EXPECT_EQ((*reg.List("r"))[0].owner_uid, 65534u);
  EXPECT_TRUE(log.empty());
  // Unregister on behalf of a uid touches only that uid's regions.
  PosixShmSegment mine = MakeSegment(Key("owner-root"), 4096);
  ASSERT_TRUE(reg.RegisterSystem("m", mine.key(), 0, 4096, uid_t{0}).ok());
  EXPECT_EQ(reg.Unregister("r", uid_t{0}).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(reg.Unregister("", uid_t{0}).ok());  // removes "m" only
  ASSERT_EQ(reg.List()->size(), 1u);
  EXPECT_EQ((*reg.List())[0].name, "r");
  EXPECT_TRUE(reg.Unregister("r", uid_t{65534}).ok());
  EXPECT_TRUE(reg.List()->empty());
}

TEST(RegionRegistry, OwnerMatchesByDefault) {
  RegionRegistry reg(Enabled());
  PosixShmSegment seg = MakeSegment(Key("mine"), 4096);  // owned by our euid
  EXPECT_TRUE(reg.RegisterSystem("a", seg.key(), 0, 4096).ok());
  EXPECT_TRUE(reg.RegisterSystem("b", seg.key(), 0, 4096, geteuid()).ok());
  EXPECT_EQ(reg.RegisterSystem("c", seg.key(), 0, 4096, geteuid() + 1).code(),
            StatusCode::kPermissionDenied);
}

// Issue #11 item 10 (shm half): a symlink or FIFO key gave INTERNAL, logged as
// a server error. A bad key is the client's error, named in a bounded message,
// never logged, and never blocks.
TEST(RegionRegistry, KeysThatAreNotSharedMemoryObjects) {
  std::vector<std::string> log;
  RegionRegistry reg(Enabled(&log));
  const std::string pid = std::to_string(getpid());
  PosixShmSegment target = MakeSegment(Key("target"), 4096);
  auto path = [](const std::string& key) { return "/dev/shm" + key; };
  struct Case {
    std::string key;
    StatusCode code;
    std::string reason;
  };
  std::vector<Case> cases;

  const std::string link = Key("symlink");
  ASSERT_EQ(symlink(path(target.key()).c_str(), path(link).c_str()), 0);
  cases.push_back({link, StatusCode::kFailedPrecondition, "symbolic link"});
  const std::string fifo = Key("fifo");
  ASSERT_EQ(mkfifo(path(fifo).c_str(), 0600), 0);
  cases.push_back({fifo, StatusCode::kFailedPrecondition, "FIFO"});
  const std::string dir = Key("dir");
  ASSERT_EQ(mkdir(path(dir).c_str(), 0700), 0);
  cases.push_back({dir, StatusCode::kFailedPrecondition, "directory"});
  const std::string sock = Key("sock");
  const int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sfd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path(sock).c_str());
  ASSERT_EQ(bind(sfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  cases.push_back({sock, StatusCode::kFailedPrecondition, "not a regular"});
  cases.push_back({Key("absent"), StatusCode::kNotFound, "does not exist"});
  const std::string empty = Key("empty");
  const int efd = shm_open(empty.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);  // size 0
  ASSERT_GE(efd, 0);
  close(efd);
  cases.push_back({empty, StatusCode::kOutOfRange, "(0 bytes)"});
  PosixShmSegment small = MakeSegment(Key("small"), 100);
  cases.push_back({small.key(), StatusCode::kOutOfRange, "(100 bytes)"});

  for (const Case& c : cases) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = reg.RegisterSystem("r", c.key, 0, 4096);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(s.code(), c.code) << c.key << ": " << s;
    EXPECT_NE(std::string(s.message()).find(c.key), std::string::npos) << s;
    EXPECT_NE(std::string(s.message()).find(c.reason), std::string::npos) << s;
    EXPECT_EQ(std::string(s.message()).find("/dev/shm"), std::string::npos) << s;
    EXPECT_LT(s.message().size(), 400u) << s;
    EXPECT_LT(secs, 1.0) << c.key;
  }
  EXPECT_TRUE(log.empty()) << log.front();
  auto list = reg.List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  close(sfd);
  for (const std::string& k : {link, fifo, sock, empty}) unlink(path(k).c_str());
  rmdir(path(dir).c_str());
}

// Names from requests come back in messages quoted, escaped and cut short.
TEST(RegionRegistry, MessagesAreBounded) {
  RegionRegistry reg(Enabled());
  const std::string huge(20000, 'n');
  for (const absl::Status& s :
       {reg.Acquire(huge).status(), reg.Unregister(huge), reg.List(huge).status()}) {
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.message().substr(0, 200);
    EXPECT_LT(s.message().size(), 200u);
    EXPECT_NE(std::string(s.message()).find("20000 bytes"), std::string::npos);
  }
  absl::Status s = reg.Acquire(std::string("a\nb\0c", 5)).status();
  EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos) << s;
  EXPECT_NE(std::string(s.message()).find("a\\nb\\000c"), std::string::npos) << s;
}

}  // namespace
}  // namespace maskd::shm
