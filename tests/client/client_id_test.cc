// ClientOptions::client_id against the real maskd run with
// --client-identity=header: every call of a Client (unary, StepStream,
// ResumableSession, a ShmClient on its channel) carries the id, so two
// Clients with one id share one per-client share, and a bad id fails at
// Connect.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/resumable_session.h"
#include "client/shm_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/server_harness.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::testing::HasSubstr;

// A Client with `client_id`. gRPC shares one connection between channels of
// equal arguments in a process: a distinct `client_name` (the user agent, a
// channel argument) gives a Client a connection of its own, so two Clients
// with one id are two connections, one client only through the header.
std::unique_ptr<Client> Connect(const MaskdProcess& server, const std::string& client_name,
                                const std::string& client_id) {
  ClientOptions options;
  options.timeout = absl::Seconds(30);
  options.client_name = client_name;
  options.client_id = client_id;
  auto client = Client::Connect(server.addr(), options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

v1::CompileRequest Digits() {
  v1::CompileRequest c;
  c.set_tokenizer("qwen3");
  c.set_regex("[0-9]+");
  return c;
}

TEST(ClientIdTest, ClientsWithOneIdShareOneShare) {
  MaskdProcess server({"--client-identity=header", "--max-sessions-per-client=2"});
  ASSERT_TRUE(server.ok()) << server.Log();
  std::unique_ptr<Client> first = Connect(server, "first", "engine-7");
  std::unique_ptr<Client> second = Connect(server, "second", "engine-7");
  ASSERT_TRUE(first && second);
  ASSERT_TRUE(first->CreateSession(Digits()).ok());
  // A ResumableSession's calls carry the id too.
  auto resumable = ResumableSession::Create(second.get(), Digits());
  ASSERT_TRUE(resumable.ok()) << resumable.status();
  for (Client* c : {first.get(), second.get()}) {
    auto refused = c->CreateSession(Digits());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("client id:engine-7 holds 2 sessions"));
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("--max-sessions-per-client=2"));
  }
  // Another id, on the same connection as `first` (same arguments), is
  // another client.
  std::unique_ptr<Client> other = Connect(server, "first", "engine-8");
  ASSERT_TRUE(other);
  EXPECT_TRUE(other->CreateSession(Digits()).ok());
  EXPECT_TRUE(other->CreateSession(Digits()).ok());
  // Giving a unit back frees it for either Client of the id.
  ASSERT_TRUE((*resumable)->Close().ok());
  EXPECT_TRUE(first->CreateSession(Digits()).ok());
}

TEST(ClientIdTest, StepStreamCarriesTheId) {
  MaskdProcess server({"--client-identity=header", "--max-streams-per-client=1"});
  ASSERT_TRUE(server.ok()) << server.Log();
  std::unique_ptr<Client> first = Connect(server, "first", "engine-7");
  std::unique_ptr<Client> second = Connect(server, "second", "engine-7");
  std::unique_ptr<Client> other = Connect(server, "second", "engine-8");
  ASSERT_TRUE(first && second && other);
  auto session = first->CreateSession(Digits());
  ASSERT_TRUE(session.ok()) << session.status();
  v1::StepRequest req;
  req.add_entries()->set_session_id(session->session_id());
  v1::StepResponse resp;
  auto open = first->OpenStepStream();
  ASSERT_TRUE(open.ok()) << open.status();
  ASSERT_TRUE((*open)->Step(req, &resp).ok());  // the stream is open on the server
  auto refused = second->OpenStepStream();
  ASSERT_TRUE(refused.ok()) << refused.status();
  absl::Status s = (*refused)->Step(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("client id:engine-7"));
  auto others = other->OpenStepStream();
  ASSERT_TRUE(others.ok()) << others.status();
  EXPECT_TRUE((*others)->Step(req, &resp).ok());
}

TEST(ClientIdTest, ShmClientOnTheChannelCarriesTheId) {
  MaskdProcess server({"--client-identity=header", "--allow_shm",
                       "--max-shm-regions-per-client=1"});
  ASSERT_TRUE(server.ok()) << server.Log();
  std::unique_ptr<Client> first = Connect(server, "first", "engine-7");
  std::unique_ptr<Client> second = Connect(server, "second", "engine-7");
  std::unique_ptr<Client> other = Connect(server, "second", "engine-8");
  ASSERT_TRUE(first && second && other);
  auto seg = shm::PosixShmSegment::Create(absl::StrCat("/maskd-test-", getpid(), "-id"), 4096);
  ASSERT_TRUE(seg.ok()) << seg.status();
  ShmClient mine(first->channel()), same(second->channel()), theirs(other->channel());
  ASSERT_TRUE(mine.RegisterSystemRegion("a", seg->key(), 0, 4096).ok());
  absl::Status refused = same.RegisterSystemRegion("b", seg->key(), 0, 4096);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("client id:engine-7"));
  EXPECT_TRUE(theirs.RegisterSystemRegion("c", seg->key(), 0, 4096).ok());
}

TEST(ClientIdTest, BadIdIsRefusedAtConnect) {
  for (const std::string& bad : {std::string("bad id"), std::string(129, 'a'),
                                 std::string("tab\there"), std::string("caf\xc3\xa9")}) {
    ClientOptions options;
    options.client_id = bad;
    auto client = Client::Connect("unix:///nonexistent/maskd.sock", options);
    ASSERT_FALSE(client.ok()) << bad;
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(client.status().message()),
                HasSubstr("1 to 128 bytes of [A-Za-z0-9._:@/+-]"));
  }
  ClientOptions options;
  options.client_id = std::string(128, 'a');
  EXPECT_TRUE(Client::Connect("unix:///nonexistent/maskd.sock", options).ok());
  options.client_id = "engine-7.pod_a:0@node/x+y";
  EXPECT_TRUE(Client::Connect("unix:///nonexistent/maskd.sock", options).ok());
}

}  // namespace
}  // namespace maskd
