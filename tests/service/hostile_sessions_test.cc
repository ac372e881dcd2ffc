// Issue #11 (hostile clients), the sessions/streams/statuses half, against the
// real maskd binary (server_harness.h) with the bundled qwen3 tokenizer: open
// StepStreams are capped and time out when idle, a stream does not keep a
// large reply's buffer, and error messages quoting client input are bounded.
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/server_harness.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::testing::HasSubstr;

constexpr uint32_t kOne = 16;

uint64_t NewSession(Client& c, const std::string& regex) {
  v1::CompileRequest req;
  req.set_tokenizer("qwen3");
  req.set_regex(regex);
  req.set_wait(true);
  auto s = c.CreateSession(req);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? s->session_id() : 0;
}

v1::StepRequest OneEntry(uint64_t id, std::vector<uint32_t> tokens = {}) {
  v1::StepRequest req;
  auto* e = req.add_entries();
  e->set_session_id(id);
  for (uint32_t t : tokens) e->add_tokens(t);
  return req;
}

uint64_t ServerRss(Client& c) {
  auto st = c.Stats();
  EXPECT_TRUE(st.ok()) << st.status();
  return st.ok() ? st->rss_bytes() : 0;
}

TEST(HostileStreamsTest, OpenStreamsAreCapped) {
  MaskdProcess server({"--max-streams=2"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto c = server.Connect();
  const uint64_t id = NewSession(*c, "[0-9]+");
  v1::StepResponse resp;
  auto s1 = c->OpenStepStream();
  auto s2 = c->OpenStepStream();
  ASSERT_TRUE(s1.ok() && s2.ok());
  ASSERT_TRUE((*s1)->Step(OneEntry(id), &resp).ok());
  ASSERT_TRUE((*s2)->Step(OneEntry(id), &resp).ok());
  auto s3 = c->OpenStepStream();
  ASSERT_TRUE(s3.ok());
  absl::Status refused = (*s3)->Step(OneEntry(id), &resp);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("--max-streams"));
  // Unary Step is not a stream: still served.
  EXPECT_TRUE(c->Step(OneEntry(id), &resp).ok());
  // A closed stream frees its slot.
  EXPECT_TRUE((*s1)->Close().ok());
  absl::Status again;
  for (int i = 0; i < 50; ++i) {
    auto s4 = c->OpenStepStream();
    ASSERT_TRUE(s4.ok());
    again = (*s4)->Step(OneEntry(id), &resp);
    if (again.ok()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(again.ok()) << again;
}

TEST(HostileStreamsTest, IdleStreamsAreFinished) {
  MaskdProcess server({"--stream-idle-timeout=400ms"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto c = server.Connect();
  const uint64_t id = NewSession(*c, "[0-9]+");
  v1::StepResponse resp;
  // A busy stream (a step every 100 ms for 1.5 s) is never idle.
  auto busy = c->OpenStepStream();
  ASSERT_TRUE(busy.ok());
  for (int i = 0; i < 15; ++i) {
    ASSERT_TRUE((*busy)->Step(OneEntry(id, {kOne}), &resp).ok()) << "step " << i;
    ASSERT_EQ(resp.results(0).num_tokens(), static_cast<uint64_t>(i + 1));
    absl::SleepFor(absl::Milliseconds(100));
  }
  // Left idle, it is finished with DEADLINE_EXCEEDED naming the flag.
  absl::SleepFor(absl::Milliseconds(1500));
  absl::Status s = (*busy)->Step(OneEntry(id), &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("--stream-idle-timeout"));
  // The session is untouched; a new stream carries on.
  auto fresh = c->OpenStepStream();
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->Step(OneEntry(id, {kOne}), &resp).ok());
  EXPECT_EQ(resp.results(0).num_tokens(), 16u);
  EXPECT_TRUE((*fresh)->Close().ok());
}

TEST(HostileStreamsTest, StreamDoesNotKeepALargeReplyBuffer) {
  // Item 8b: each StepStream kept its largest reply buffer (up to 64 MB)
  // while open. A 1024-entry batch with words_per_row 15000 is a 61 MB reply
  // (unknown ids: zero rows, NOT_FOUND entries).
  MaskdProcess server({"--max-message-bytes=67108864"});
  ASSERT_TRUE(server.ok()) << server.Log();
  ClientOptions options;
  options.max_message_bytes = 64 << 20;
  auto c = Client::Connect(server.addr(), options);
  ASSERT_TRUE(c.ok());
  const uint64_t id = NewSession(**c, "[0-9]+");
  v1::StepRequest big;
  for (int i = 0; i < 1024; ++i) big.add_entries()->set_session_id(i + 1);
  big.set_words_per_row(15000);
  const uint64_t kBig = 1024ull * 15000 * 4;
  v1::StepResponse resp;

  // (1) A large reply, then small ones: the buffer is dropped after the next write.
  auto stream = (*c)->OpenStepStream();
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->Step(OneEntry(id), &resp).ok());
  const uint64_t base = ServerRss(**c);
  ASSERT_TRUE((*stream)->Step(big, &resp).ok());
  ASSERT_EQ(resp.masks().size(), kBig);
  const uint64_t peak = ServerRss(**c);
  ASSERT_TRUE((*stream)->Step(OneEntry(id), &resp).ok());
  ASSERT_TRUE((*stream)->Step(OneEntry(id), &resp).ok());
  const uint64_t after = ServerRss(**c);
  EXPECT_GT(peak, base + kBig * 3 / 4) << "the reply buffer was not resident?";
  EXPECT_LT(after, base + kBig / 4) << "base " << base << " peak " << peak;

  // (2) A large reply, then nothing: the reaper frees it within ~2 s.
  ASSERT_TRUE((*stream)->Step(big, &resp).ok());
  const uint64_t peak2 = ServerRss(**c);
  EXPECT_GT(peak2, base + kBig * 3 / 4);
  uint64_t idle = peak2;
  for (int i = 0; i < 40 && idle > base + kBig / 4; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    idle = ServerRss(**c);
  }
  EXPECT_LT(idle, base + kBig / 4) << "base " << base << " peak " << peak2;
  // The stream still works after its buffer was freed.
  ASSERT_TRUE((*stream)->Step(OneEntry(id, {kOne}), &resp).ok());
  EXPECT_TRUE(resp.results(0).status().code() == 0);
  EXPECT_TRUE((*stream)->Close().ok());
}

TEST(HostileCompileTest, ShortDeadlineIsNotCachedForOthers) {
  // Item 9, through the server: a 1 ms compile fails with DEADLINE_EXCEEDED;
  // the same constraint with the default deadline then compiles.
  MaskdProcess server({"--failure-ttl=60s"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto c = server.Connect();
  v1::CompileRequest req;
  req.set_tokenizer("qwen3");
  req.set_regex("[a-z]*c[a-z]{10}");
  req.mutable_options()->set_eager(true);
  req.mutable_options()->set_timeout_ms(1);
  req.set_wait(true);
  auto first = c->Compile(req);
  EXPECT_EQ(first.status().code(), absl::StatusCode::kDeadlineExceeded) << first.status();
  req.mutable_options()->set_timeout_ms(0);
  auto second = c->Compile(req);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->state(), v1::INDEX_STATE_READY);
  EXPECT_FALSE(second->cache_hit());
}

}  // namespace
}  // namespace maskd
