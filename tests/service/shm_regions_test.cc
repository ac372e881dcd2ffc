// SharedMemory regions against the real maskd binary (--allow_shm):
// register, list and unregister; every registration error; the flags that
// switch shared memory off, fence its keys (--shm_prefix) and share it out
// (--max-shm-regions-per-client); keys that are not shared-memory objects.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/shm_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/apply_mask.h"
#include "nlohmann/json.hpp"
#include "tests/service/server_harness.h"
#include "tests/service/shm_test_util.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::maskd::testing::MetricValue;
using ::maskd::testing::SessionTokens;
using ::maskd::testing::WaitForAnyMetric;
using ::testing::HasSubstr;
using ::testing::Not;
using Code = absl::StatusCode;
using ::maskd::shm_test::Key;
using ::maskd::shm_test::NewSegment;
using ::maskd::shm_test::ShmTest;

TEST_F(ShmTest, RegisterListUnregister) {
  auto seg = NewSegment("list", 1 << 16);
  ASSERT_TRUE(shm_->RegisterSystemRegion("b", seg.key(), 100, 1000).ok());
  ASSERT_TRUE(shm_->RegisterSystemRegion("a", seg.key(), 0, seg.size()).ok());
  auto list = shm_->ListRegions();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name(), "a");
  EXPECT_EQ((*list)[0].kind(), v1::REGION_KIND_SYSTEM);
  EXPECT_EQ((*list)[0].byte_size(), seg.size());
  EXPECT_EQ((*list)[0].device_id(), -1);
  EXPECT_EQ((*list)[0].calls_in_flight(), 0);
  EXPECT_EQ((*list)[1].name(), "b");
  EXPECT_EQ((*list)[1].byte_size(), 1000u);
  auto one = shm_->ListRegions("b");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].name(), "b");
  EXPECT_TRUE(shm_->UnregisterRegion("a").ok());
  list = shm_->ListRegions();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(shm_->ListRegions("a").status().code(), Code::kNotFound);
  EXPECT_TRUE(shm_->RegisterSystemRegion("a", seg.key(), 0, 8).ok());  // name free again
  EXPECT_TRUE(shm_->UnregisterRegion("").ok());
  list = shm_->ListRegions();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST_F(ShmTest, RegistrationErrors) {
  auto seg = NewSegment("errors", 4096);
  auto code = [&](const std::string& name, const std::string& key, uint64_t off, uint64_t size) {
    return shm_->RegisterSystemRegion(name, key, off, size).code();
  };
  EXPECT_EQ(code("r", "no-slash", 0, 8), Code::kInvalidArgument);
  EXPECT_EQ(code("r", absl::StrCat("/other-", getpid()), 0, 8), Code::kPermissionDenied);
  EXPECT_EQ(code("r", Key("missing"), 0, 8), Code::kNotFound);
  EXPECT_EQ(code("r", seg.key(), 0, 4097), Code::kOutOfRange);
  EXPECT_EQ(code("r", seg.key(), 4000, 97), Code::kOutOfRange);
  EXPECT_EQ(code("r", seg.key(), std::numeric_limits<uint64_t>::max(), 2), Code::kInvalidArgument);
  EXPECT_EQ(code("r", seg.key(), 0, 0), Code::kInvalidArgument);
  EXPECT_EQ(code("", seg.key(), 0, 8), Code::kInvalidArgument);
  ASSERT_EQ(code("r", seg.key(), 0, 4096), Code::kOk);
  EXPECT_EQ(code("r", seg.key(), 0, 8), Code::kAlreadyExists);
  EXPECT_EQ(shm_->UnregisterRegion("nope").code(), Code::kNotFound);
  EXPECT_EQ(shm_->ListRegions("nope").status().code(), Code::kNotFound);
  // CUDA handles: the length is checked first, on every build.
  for (size_t len : {0, 63, 65, 128}) {
    absl::Status s = shm_->RegisterCudaRegion("c", std::string(len, 'x'), 0, 0, 8);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << len << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("64"));
  }
  // A well-formed but bogus handle: UNIMPLEMENTED (no CUDA in this build),
  // UNAVAILABLE (no GPU) or INVALID_ARGUMENT (rejected by the driver); the
  // message never carries CUDA internals.
  absl::Status s = shm_->RegisterCudaRegion("c", std::string(64, '\x01'), 0, 0, 8);
  EXPECT_THAT(s.code(), ::testing::AnyOf(Code::kUnimplemented, Code::kUnavailable,
                                         Code::kInvalidArgument))
      << s;
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("cuda")));
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("CUDA_ERROR")));
  // Messages never name server paths.
  absl::Status missing = shm_->RegisterSystemRegion("r2", Key("gone"), 0, 8);
  EXPECT_THAT(std::string(missing.message()), Not(HasSubstr("/dev/shm")));
}

TEST(ShmDisabled, RegistrationOffByDefault) {
  MaskdProcess server;  // no --allow_shm
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  ShmClient shm(client->channel(), absl::Seconds(30));
  auto seg = NewSegment("disabled", 4096);
  absl::Status s = shm.RegisterSystemRegion("r", seg.key(), 0, 4096);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--allow_shm"));
  EXPECT_EQ(shm.RegisterCudaRegion("c", std::string(64, 'x'), 0, 0, 8).code(),
            Code::kFailedPrecondition);
  auto list = shm.ListRegions();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  v1::StepInRegionRequest req;
  req.mutable_masks()->set_region("r");
  v1::StepInRegionResponse resp;
  EXPECT_EQ(shm.StepInRegion(req, &resp).code(), Code::kNotFound);
}

TEST(ShmPrefix, KeysOutsideTheServersPrefixAreRefused) {
  const std::string prefix = absl::StrCat("/maskdx-", getpid(), "-");
  MaskdProcess server({"--allow_shm", "--shm_prefix=" + prefix});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  ShmClient shm(client->channel(), absl::Seconds(30));
  auto inside = shm::PosixShmSegment::Create(prefix + "a", 4096);
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_TRUE(shm.RegisterSystemRegion("in", inside->key(), 0, 4096).ok());
  auto outside = NewSegment("prefix", 4096);  // "/maskd-test-...": the default prefix
  absl::Status s = shm.RegisterSystemRegion("out", outside.key(), 0, 4096);
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(prefix));

  MaskdProcess bad({"--allow_shm", "--shm_prefix=no-slash"}, /*wait_ready=*/false);
  EXPECT_EQ(bad.Wait(30), 2);
  EXPECT_THAT(bad.Log(), HasSubstr("--shm_prefix"));
}

// Issue #24 finding 3: one client (by default its connection) has at most
// --max-shm-regions-per-client regions registered; another connection of the
// same uid still registers; unregistering (from any connection of the uid)
// gives the units back.
TEST(ShmShares, RegionsPerClient) {
  MaskdProcess server({"--allow_shm", "--max-shm-regions-per-client=2"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto connection = [&] {  // a connection of its own (no shared subchannel)
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(server.addr(), grpc::InsecureChannelCredentials(), args);
  };
  ShmClient mine(connection(), absl::Seconds(30)), theirs(connection(), absl::Seconds(30));
  auto seg = NewSegment("shares", 4096);
  ASSERT_TRUE(mine.RegisterSystemRegion("m1", seg.key(), 0, 4096).ok());
  ASSERT_TRUE(mine.RegisterSystemRegion("m2", seg.key(), 0, 4096).ok());
  absl::Status refused = mine.RegisterSystemRegion("m3", seg.key(), 0, 4096);
  EXPECT_EQ(refused.code(), Code::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("holds 2 shared-memory regions, its whole share "
                        "(--max-shm-regions-per-client=2"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("client conn:"));
  // A failed registration takes no unit: another connection has its own.
  EXPECT_EQ(theirs.RegisterSystemRegion("t1", Key("gone"), 0, 8).code(), Code::kNotFound);
  ASSERT_TRUE(theirs.RegisterSystemRegion("t1", seg.key(), 0, 4096).ok());
  ASSERT_TRUE(theirs.RegisterSystemRegion("t2", seg.key(), 0, 4096).ok());
  // Unregistering gives the unit back.
  ASSERT_TRUE(mine.UnregisterRegion("m1").ok());
  EXPECT_TRUE(mine.RegisterSystemRegion("m3", seg.key(), 0, 4096).ok());
  // So does unregistering all of the uid's regions, from the other connection.
  ASSERT_TRUE(theirs.UnregisterRegion("").ok());
  EXPECT_TRUE(mine.RegisterSystemRegion("m4", seg.key(), 0, 4096).ok());
  EXPECT_TRUE(mine.RegisterSystemRegion("m5", seg.key(), 0, 4096).ok());
  EXPECT_TRUE(theirs.RegisterSystemRegion("t3", seg.key(), 0, 4096).ok());
}

// Issue #11 item 10 (shm half): a symlink or FIFO key answered INTERNAL and
// was logged as a server error. Now: the client's error, named, bounded, not
// logged, and the FIFO never blocks the server.
TEST_F(ShmTest, KeysThatAreNotObjectsAreTheClientsError) {
  auto target = NewSegment("target", 4096);
  const std::string link = Key("symlink"), fifo = Key("fifo"), dir = Key("dir");
  ASSERT_EQ(symlink(("/dev/shm" + target.key()).c_str(), ("/dev/shm" + link).c_str()), 0);
  ASSERT_EQ(mkfifo(("/dev/shm" + fifo).c_str(), 0600), 0);
  ASSERT_EQ(mkdir(("/dev/shm" + dir).c_str(), 0700), 0);
  const std::string empty = Key("empty");
  const int efd = shm_open(empty.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(efd, 0);
  close(efd);
  auto small = NewSegment("small", 100);
  const std::string log_before = server_->Log();
  struct Case {
    std::string key;
    Code code;
    std::string reason;
  };
  for (const Case& c : std::vector<Case>{
           {link, Code::kFailedPrecondition, "symbolic link"},
           {fifo, Code::kFailedPrecondition, "FIFO"},
           {dir, Code::kFailedPrecondition, "directory"},
           {Key("absent"), Code::kNotFound, "does not exist"},
           {empty, Code::kOutOfRange, "(0 bytes)"},
           {small.key(), Code::kOutOfRange, "(100 bytes)"},
       }) {
    absl::Status s = shm_->RegisterSystemRegion("k", c.key, 0, 4096);
    EXPECT_EQ(s.code(), c.code) << c.key << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.key));
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.reason));
    EXPECT_LT(s.message().size(), 400u);
  }
  // A 20 kB region name comes back NOT_FOUND with a short message.
  v1::StepInRegionRequest req;
  req.mutable_masks()->set_region(std::string(20000, 'r'));
  v1::StepInRegionResponse resp;
  absl::Status s = shm_->StepInRegion(req, &resp);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.message().substr(0, 100);
  EXPECT_LT(s.message().size(), 200u);
  EXPECT_EQ(server_->Log().substr(log_before.size()).find("ERROR"), std::string::npos)
      << server_->Log().substr(log_before.size());
  unlink(("/dev/shm" + link).c_str());
  unlink(("/dev/shm" + fifo).c_str());
  unlink(("/dev/shm" + empty).c_str());
  rmdir(("/dev/shm" + dir).c_str());
}

}  // namespace
}  // namespace maskd
