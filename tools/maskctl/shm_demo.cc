// maskctl --addr ADDR shm-demo --tokenizer NAME CONSTRAINT (constraint_flags.h)
//   [--rows K] [--steps N] [--dtype fp32|bf16|fp16] [--seed S] [--key /maskd-...]
// Masks applied in place in shared memory (SharedMemory.StepInRegion) against
// masks returned in the reply (Maskd.Step) and applied by the client with
// maskd::CpuApplier, on the same batch in the same run:
//  - a POSIX shared-memory logits buffer of K rows x the tokenizer's vocab
//    (--key, default /maskd-shm-demo-<pid>; the server needs --allow_shm and
//    a --shm_prefix the key starts with) is registered as a region;
//  - 2K sessions over the constraint: K stepped by StepInRegion (apply path), K
//    twins stepped by Step (reply path) with the same tokens;
//  - each step: both logits buffers are filled with 1.0; the apply path calls
//    StepInRegion (logits target, identity row map); the reply path calls Step
//    and applies the reply's masks to a private buffer with CpuApplier (the
//    two are timed separately, in alternating order); then EVERY logit of both
//    buffers is checked against the Step reply's mask (allowed: 1.0 unchanged,
//    else -inf) and each row picks a random allowed token (EOS avoided while
//    anything else is allowed) from the shared-memory logits for the next step.
// → {"rows": K, "steps": N, "dtype": "...", "mismatches": 0,
//    "apply_p50_us": .., "reply_p50_us": ..}
// Errors (any failed entry included): stderr, exit 2.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tools/maskctl/args.h"
#include "tools/maskctl/command.h"
#include "tools/maskctl/constraint_flags.h"
#include "tools/maskctl/online_sessions.h"
#include "tools/maskctl/online_util.h"
#include "tools/maskctl/percentile.h"

#include "client/shm_client.h"
#include "kernels/apply_mask.h"

namespace maskctl {
namespace {

// Bit patterns of 1.0 and -inf per dtype.
struct Pattern {
  uint32_t one, neg_inf;
  size_t size;
};

Pattern PatternOf(maskd::LogitsDtype d) {
  switch (d) {
    case maskd::LogitsDtype::kFloat16: return {0x3C00, 0xFC00, 2};
    case maskd::LogitsDtype::kBFloat16: return {0x3F80, 0xFF80, 2};
    default: return {0x3F800000u, 0xFF800000u, 4};
  }
}

void Fill(void* data, size_t count, const Pattern& p) {
  if (p.size == 4) {
    std::fill_n(static_cast<uint32_t*>(data), count, p.one);
  } else {
    std::fill_n(static_cast<uint16_t*>(data), count, static_cast<uint16_t>(p.one));
  }
}

inline uint32_t Get(const void* data, size_t i, const Pattern& p) {
  if (p.size == 4) {
    uint32_t v;
    std::memcpy(&v, static_cast<const char*>(data) + i * 4, 4);
    return v;
  }
  uint16_t v;
  std::memcpy(&v, static_cast<const char*>(data) + i * 2, 2);
  return v;
}

// --dtype's value: the logits' dtype, in the library's terms and the proto's.
absl::StatusOr<std::pair<maskd::LogitsDtype, maskd::v1::LogitsDtype>> DtypeNamed(const std::string& name) {
  if (name == "fp32") return std::pair{maskd::LogitsDtype::kFloat32, maskd::v1::LOGITS_DTYPE_FP32};
  if (name == "fp16") return std::pair{maskd::LogitsDtype::kFloat16, maskd::v1::LOGITS_DTYPE_FP16};
  if (name == "bf16") return std::pair{maskd::LogitsDtype::kBFloat16, maskd::v1::LOGITS_DTYPE_BF16};
  return absl::InvalidArgumentError("--dtype must be fp32, fp16 or bf16");
}

// The logits of both paths after one step: `shm` (applied in shared memory)
// and `local` (the reply's masks applied by the client), `rows` x `vocab`.
struct StepLogits {
  const void* shm;
  const void* local;
  size_t rows;
  uint32_t vocab;
  Pattern pat;
};

// Checks every logit of both buffers against the Step reply's masks
// (allowed: 1.0 unchanged, else -inf) and picks each row's next token at
// random among those the shared-memory logits allow, avoiding `eos` (sorted)
// while another is allowed (-1: none). Returns the number of wrong logits.
uint64_t CheckAndPick(const StepLogits& l, const maskd::v1::StepResponse& reply,
                      const std::vector<uint32_t>& eos, std::mt19937_64& rng,
                      std::vector<int64_t>* next) {
  uint64_t mismatches = 0;
  std::vector<uint32_t> allowed, allowed_non_eos;
  for (size_t r = 0; r < l.rows; ++r) {
    absl::Span<const uint32_t> mask = maskd::MaskRow(reply, static_cast<int>(r));
    const size_t base = r * l.vocab;
    allowed.clear();
    allowed_non_eos.clear();
    for (uint32_t t = 0; t < l.vocab; ++t) {
      const uint32_t want = maskd::Allowed(mask, t) ? l.pat.one : l.pat.neg_inf;
      const uint32_t got = Get(l.shm, base + t, l.pat);
      mismatches += (got != want) + (Get(l.local, base + t, l.pat) != want);
      if (got != l.pat.neg_inf) {
        allowed.push_back(t);
        if (!std::binary_search(eos.begin(), eos.end(), t)) allowed_non_eos.push_back(t);
      }
    }
    const auto& pool = allowed_non_eos.empty() ? allowed : allowed_non_eos;
    (*next)[r] = pool.empty() ? -1
                              : pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
  }
  return mismatches;
}

// Unregisters the region on every exit path.
struct RegionCleanup {
  maskd::ShmClient* shm;
  std::string region;
  ~RegionCleanup() {
    if (!region.empty()) (void)shm->UnregisterRegion(region);
  }
};

int ShmDemo(const Context& ctx) {
  using Clock = std::chrono::steady_clock;
  const char* kCmd = "shm-demo";
  const Args* args = &ctx.args;
  auto compile_or = CompileRequestFromFlags(*args);
  if (!compile_or.ok()) return Fail(kCmd, std::string(compile_or.status().message()));
  maskd::v1::CompileRequest compile = *std::move(compile_or);
  compile.set_wait(true);
  const std::string* tokenizer = &compile.tokenizer();
  auto k = args->GetUint("rows", 1);
  auto n = args->GetUint("steps", 100);
  auto seed = args->GetUint("seed", 1);
  for (const auto* v : {&k, &n, &seed}) {
    if (!v->ok()) return Fail(kCmd, std::string(v->status().message()));
  }
  if (*k == 0 || *n == 0) return Fail(kCmd, "--rows and --steps must be > 0");
  const std::string dtype_name = args->Get("dtype").value_or("fp32");
  auto dtypes = DtypeNamed(dtype_name);
  if (!dtypes.ok()) return Fail(kCmd, std::string(dtypes.status().message()));
  const auto [dtype, proto_dtype] = *dtypes;
  const Pattern pat = PatternOf(dtype);
  const std::string key =
      args->Get("key").value_or("/maskd-shm-demo-" + std::to_string(getpid()));

  auto client = OnlineConnect(ctx);
  if (!client.ok()) return Fail(kCmd, std::string(client.status().message()));
  maskd::Client& c = **client;
  maskd::ShmClient shm(c.channel());
  auto server_tokenizer = FindServerTokenizer(c, *tokenizer);
  if (!server_tokenizer.ok()) return Fail(kCmd, std::string(server_tokenizer.status().message()));
  const uint32_t vocab = server_tokenizer->vocab_size;
  const std::vector<uint32_t>& eos = server_tokenizer->eos_ids;
  const size_t rows = *k, elems = rows * vocab;

  auto seg = maskd::shm::PosixShmSegment::Create(key, elems * pat.size);
  if (!seg.ok()) return Fail(kCmd, "creating " + key + ": " + seg.status().ToString());
  RegionCleanup cleanup{&shm, ""};
  const std::string region = "shm-demo-" + std::to_string(getpid());
  if (absl::Status s = shm.RegisterSystemRegion(region, key, 0, seg->size()); !s.ok()) {
    return Fail(kCmd, "RegisterSystemRegion: " + s.ToString());
  }
  cleanup.region = region;

  maskd::v1::StepInRegionRequest apply_req;
  maskd::v1::StepInRegionResponse apply_resp;
  maskd::v1::StepRequest reply_req;
  maskd::v1::StepResponse reply_resp;
  SessionSet sessions(&c);  // closed before the region is unregistered
  if (absl::Status s = sessions.Create(compile, 2 * rows); !s.ok()) return Fail(kCmd, s.ToString());
  for (size_t i = 0; i < 2 * rows; ++i) {
    (i < rows ? apply_req.add_entries() : reply_req.add_entries())->set_session_id(sessions.ids()[i]);
  }
  maskd::v1::LogitsTarget* target = apply_req.mutable_logits();
  target->set_region(region);
  target->set_offset(0);
  target->set_dtype(proto_dtype);
  target->set_rows(static_cast<uint32_t>(rows));
  target->set_vocab(vocab);

  std::vector<uint8_t> local(elems * pat.size);
  maskd::CpuApplier applier;
  maskd::LogitsBatch local_batch{local.data(), dtype, static_cast<int64_t>(rows), vocab, 0};
  std::mt19937_64 rng(*seed);
  std::vector<int64_t> next(rows, -1);
  std::vector<double> apply_us, reply_us;
  uint64_t mismatches = 0;

  for (uint64_t step = 0; step < *n; ++step) {
    for (size_t r = 0; r < rows; ++r) {
      auto* a = apply_req.mutable_entries(static_cast<int>(r));
      auto* b = reply_req.mutable_entries(static_cast<int>(r));
      a->clear_tokens();
      b->clear_tokens();
      if (next[r] >= 0) {
        a->add_tokens(static_cast<uint32_t>(next[r]));
        b->add_tokens(static_cast<uint32_t>(next[r]));
      }
    }
    Fill(seg->data(), elems, pat);
    Fill(local.data(), elems, pat);
    auto run_apply = [&]() -> absl::Status {
      const auto t0 = Clock::now();
      absl::Status s = shm.StepInRegion(apply_req, &apply_resp);
      apply_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      return s;
    };
    auto run_reply = [&]() -> absl::Status {
      const auto t0 = Clock::now();
      absl::Status s = c.Step(reply_req, &reply_resp);
      if (s.ok()) {
        maskd::MaskBatch mask{reinterpret_cast<const uint32_t*>(reply_resp.masks().data()),
                              static_cast<int64_t>(rows), reply_resp.words_per_row(), 0};
        s = applier.Apply(local_batch, mask);
      }
      reply_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      return s;
    };
    // Alternate the order so that neither path always runs on a warm cache.
    absl::Status s1 = step % 2 == 0 ? run_apply() : run_reply();
    absl::Status s2 = step % 2 == 0 ? run_reply() : run_apply();
    if (!s1.ok()) return Fail(kCmd, s1.ToString());
    if (!s2.ok()) return Fail(kCmd, s2.ToString());
    const std::string at = " step " + std::to_string(step);
    if (std::string e = FirstFailedEntry(apply_resp.results(), "StepInRegion" + at); !e.empty()) {
      return Fail(kCmd, e);
    }
    if (std::string e = FirstFailedEntry(reply_resp.results(), "Step" + at); !e.empty()) {
      return Fail(kCmd, e);
    }
    if (reply_resp.words_per_row() != apply_resp.words_per_row()) {
      return Fail(kCmd, "words_per_row differs between Step and StepInRegion");
    }
    mismatches += CheckAndPick({seg->data(), local.data(), rows, vocab, pat}, reply_resp, eos, rng, &next);
  }
  std::printf("{\"rows\": %zu, \"steps\": %llu, \"dtype\": \"%s\", \"mismatches\": %llu, "
              "\"apply_p50_us\": %.1f, \"reply_p50_us\": %.1f}\n",
              rows, static_cast<unsigned long long>(*n), dtype_name.c_str(),
              static_cast<unsigned long long>(mismatches), Percentile(apply_us, 0.5),
              Percentile(reply_us, 0.5));
  return 0;
}

}  // namespace
MASKCTL_COMMAND(shm_demo, "shm-demo",
                "masks applied in shared memory vs returned in the reply (server --allow_shm)", Form{},
                OnlineConstraintForm("shm-demo --tokenizer NAME CONSTRAINT"
                                     " [--rows K] [--steps N] [--dtype fp32|bf16|fp16] [--seed S] "
                                     "[--key /maskd-...]",
                                     {"rows", "steps", "dtype", "seed", "key"}, {}),
                ShmDemo);

}  // namespace maskctl
