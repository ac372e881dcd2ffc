// maskctl --addr ADDR bench --tokenizer NAME CONSTRAINT (constraint_flags.h)
//   [--sessions K] [--steps N] [--stream] [--rss] [--seed S] [--pings P]
// K sessions each advance by one random allowed token per step (EOS avoided
// while anything else is allowed), all K batched in one Step call per step;
// then P (default 1000) empty Ping calls on the same channel.
// → {"sessions": K, "steps": N, "step_p50_us": .., "step_p99_us": ..,
//    "steps_per_s": .., "ping_p50_us": ..}
// With --rss, also "server_rss_10pct_bytes" and "server_rss_bytes": the
// server's resident memory (Stats RPC) after 10% and 100% of the steps.
// Any failed entry is an error (stderr, exit 2).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tools/maskctl/args.h"
#include "tools/maskctl/command.h"
#include "tools/maskctl/constraint_flags.h"
#include "tools/maskctl/online_sessions.h"
#include "tools/maskctl/online_util.h"
#include "tools/maskctl/percentile.h"

namespace maskctl {
namespace {

int Bench(const Context& ctx) {
  using Clock = std::chrono::steady_clock;
  const Args* args = &ctx.args;
  auto k = args->GetUint("sessions", 1);
  auto n = args->GetUint("steps", 100);
  auto seed = args->GetUint("seed", 1);
  auto pings = args->GetUint("pings", 1000);
  for (const auto* v : {&k, &n, &seed, &pings}) {
    if (!v->ok()) return Fail("bench", std::string(v->status().message()));
  }
  if (*k == 0 || *n == 0) return Fail("bench", "--sessions and --steps must be > 0");
  auto compile_or = CompileRequestFromFlags(*args);
  if (!compile_or.ok()) return Fail("bench", std::string(compile_or.status().message()));
  const maskd::v1::CompileRequest& compile = *compile_or;
  auto client = OnlineConnect(ctx);
  if (!client.ok()) return Fail("bench", std::string(client.status().message()));
  maskd::Client& c = **client;
  auto tokenizer = FindServerTokenizer(c, compile.tokenizer());
  if (!tokenizer.ok()) return Fail("bench", tokenizer.status().ToString());
  const std::vector<uint32_t>& eos = tokenizer->eos_ids;
  SessionSet sessions(&c);  // closed after the stream (declared after it)
  if (absl::Status s = sessions.Create(compile, *k); !s.ok()) return Fail("bench", s.ToString());
  std::unique_ptr<maskd::StepStream> stream;
  if (args->Has("stream")) {
    auto st = c.OpenStepStream();
    if (!st.ok()) return Fail("bench", st.status().ToString());
    stream = *std::move(st);
  }
  maskd::v1::StepRequest req;
  maskd::v1::StepResponse resp;
  for (uint64_t id : sessions.ids()) req.add_entries()->set_session_id(id);
  std::mt19937_64 rng(*seed);
  std::vector<double> lat_us;
  lat_us.reserve(*n);
  uint64_t rss_10 = 0;
  const uint64_t at_10 = std::max<uint64_t>(1, *n / 10);
  const auto t_start = Clock::now();
  for (uint64_t step = 0; step < *n; ++step) {
    absl::Status s =
        TimeCall(&lat_us, [&] { return stream ? stream->Step(req, &resp) : c.Step(req, &resp); });
    if (!s.ok()) return Fail("bench", s.ToString());
    if (std::string e = FirstFailedEntry(resp.results(), "step " + std::to_string(step)); !e.empty()) {
      return Fail("bench", e);
    }
    for (int i = 0; i < resp.results_size(); ++i) {
      SetNextToken(req.mutable_entries(i), RandomAllowed(maskd::MaskRow(resp, i), eos, rng));
    }
    if (args->Has("rss") && step + 1 == at_10) {
      auto st = c.Stats();
      if (st.ok()) rss_10 = st->rss_bytes();
    }
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  if (stream) {
    absl::Status s = stream->Close();
    stream.reset();
    if (!s.ok()) return Fail("bench", s.ToString());
  }
  uint64_t rss_end = 0;
  if (args->Has("rss")) {
    auto st = c.Stats();
    if (st.ok()) rss_end = st->rss_bytes();
  }
  sessions.CloseAll();
  std::vector<double> ping_us;
  for (uint64_t i = 0; i < *pings; ++i) {
    if (absl::Status s = TimeCall(&ping_us, [&] { return c.Ping(); }); !s.ok()) {
      return Fail("bench", s.ToString());
    }
  }
  std::printf("{\"sessions\": %llu, \"steps\": %llu, \"step_p50_us\": %.1f, \"step_p99_us\": %.1f, "
              "\"steps_per_s\": %.1f, \"ping_p50_us\": %.1f",
              static_cast<unsigned long long>(*k), static_cast<unsigned long long>(*n),
              Percentile(lat_us, 0.5), Percentile(lat_us, 0.99),
              static_cast<double>(*n) / total_s, Percentile(ping_us, 0.5));
  if (args->Has("rss")) {
    std::printf(", \"server_rss_10pct_bytes\": %llu, \"server_rss_bytes\": %llu",
                static_cast<unsigned long long>(rss_10), static_cast<unsigned long long>(rss_end));
  }
  std::printf("}\n");
  return 0;
}

}  // namespace
MASKCTL_COMMAND(bench, "bench", "Step latency against a running maskd", Form{},
                OnlineConstraintForm("bench --tokenizer NAME CONSTRAINT"
                                     " [--sessions K] [--steps N] [--stream] [--rss] [--seed S] "
                                     "[--pings P]",
                                     {"sessions", "steps", "seed", "pings"}, {"stream", "rss"}),
                Bench);

}  // namespace maskctl
