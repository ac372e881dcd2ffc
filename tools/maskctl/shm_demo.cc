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
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
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
// (allowed: 1.0 unchanged, else -inf) and picks each row's next token as
// RandomAllowed does among those the shared-memory logits allow, avoiding
// `eos` (sorted) while another is allowed (-1: none). Returns the number of
// wrong logits.
uint64_t CheckAndPick(const StepLogits& l, const maskd::v1::StepResponse& reply,
                      const std::vector<uint32_t>& eos, std::mt19937_64& rng,
                      std::vector<int64_t>* next) {
  uint64_t mismatches = 0;
  std::vector<uint32_t> shm_allowed((l.vocab + 31) / 32);  // a mask row read from the logits
  for (size_t r = 0; r < l.rows; ++r) {
    absl::Span<const uint32_t> mask = maskd::MaskRow(reply, static_cast<int>(r));
    const size_t base = r * l.vocab;
    std::fill(shm_allowed.begin(), shm_allowed.end(), 0);
    for (uint32_t t = 0; t < l.vocab; ++t) {
      const uint32_t want = maskd::Allowed(mask, t) ? l.pat.one : l.pat.neg_inf;
      const uint32_t got = Get(l.shm, base + t, l.pat);
      mismatches += (got != want) + (Get(l.local, base + t, l.pat) != want);
      if (got != l.pat.neg_inf) shm_allowed[t >> 5] |= 1u << (t & 31);
    }
    (*next)[r] = RandomAllowed(shm_allowed, eos, rng);
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

// shm-demo's own flags.
struct DemoFlags {
  uint64_t rows = 0, steps = 0, seed = 0;
  std::string dtype_name;  // as given: fp32, fp16 or bf16
  maskd::LogitsDtype dtype = maskd::LogitsDtype::kFloat32;
  maskd::v1::LogitsDtype proto_dtype = maskd::v1::LOGITS_DTYPE_FP32;
  std::string key;  // of the POSIX shared-memory object
};

absl::StatusOr<DemoFlags> ReadDemoFlags(const Args& args) {
  auto k = args.GetUint("rows", 1);
  auto n = args.GetUint("steps", 100);
  auto seed = args.GetUint("seed", 1);
  for (const auto* v : {&k, &n, &seed}) {
    if (!v->ok()) return v->status();
  }
  if (*k == 0 || *n == 0) return absl::InvalidArgumentError("--rows and --steps must be > 0");
  DemoFlags flags;
  flags.rows = *k;
  flags.steps = *n;
  flags.seed = *seed;
  flags.dtype_name = args.Get("dtype").value_or("fp32");
  auto dtypes = DtypeNamed(flags.dtype_name);
  if (!dtypes.ok()) return dtypes.status();
  std::tie(flags.dtype, flags.proto_dtype) = *dtypes;
  flags.key = args.Get("key").value_or("/maskd-shm-demo-" + std::to_string(getpid()));
  return flags;
}

// Where the apply path's logits are: `rows` x `vocab` at offset 0 of region
// `region`, mapped here at `data`.
struct DemoLogits {
  std::string region;
  void* data;
  maskd::LogitsDtype dtype;
  maskd::v1::LogitsDtype proto_dtype;
  size_t rows;
  uint32_t vocab;
};

// Steps the two paths over K sessions each and checks them against each
// other; the sessions' first K ids go to the apply path, the next K to the
// reply path.
class DemoStepper {
 public:
  DemoStepper(maskd::Client* client, maskd::ShmClient* shm, const DemoLogits& logits,
              const std::vector<uint64_t>& session_ids, uint64_t seed)
      : client_(client), shm_(shm), logits_(logits), pat_(PatternOf(logits.dtype)),
        local_(logits.rows * logits.vocab * pat_.size),
        local_batch_{local_.data(), logits.dtype, static_cast<int64_t>(logits.rows), logits.vocab, 0},
        rng_(seed), next_(logits.rows, -1) {
    for (size_t i = 0; i < 2 * logits.rows; ++i) {
      (i < logits.rows ? apply_req_.add_entries() : reply_req_.add_entries())
          ->set_session_id(session_ids[i]);
    }
    maskd::v1::LogitsTarget* target = apply_req_.mutable_logits();
    target->set_region(logits.region);
    target->set_offset(0);
    target->set_dtype(logits.proto_dtype);
    target->set_rows(static_cast<uint32_t>(logits.rows));
    target->set_vocab(logits.vocab);
  }

  // One step of both paths, timed, then every logit checked and the next
  // tokens picked (avoiding `eos`, sorted). An error's message is what the
  // demo prints.
  absl::Status Step(uint64_t step, const std::vector<uint32_t>& eos) {
    for (size_t r = 0; r < logits_.rows; ++r) {
      SetNextToken(apply_req_.mutable_entries(static_cast<int>(r)), next_[r]);
      SetNextToken(reply_req_.mutable_entries(static_cast<int>(r)), next_[r]);
    }
    const size_t elems = logits_.rows * logits_.vocab;
    Fill(logits_.data, elems, pat_);
    Fill(local_.data(), elems, pat_);
    // Alternate the order so that neither path always runs on a warm cache.
    absl::Status s1 = step % 2 == 0 ? RunApply() : RunReply();
    absl::Status s2 = step % 2 == 0 ? RunReply() : RunApply();
    if (!s1.ok()) return absl::UnknownError(s1.ToString());
    if (!s2.ok()) return absl::UnknownError(s2.ToString());
    const std::string at = " step " + std::to_string(step);
    if (std::string e = FirstFailedEntry(apply_resp_.results(), "StepInRegion" + at); !e.empty()) {
      return absl::UnknownError(e);
    }
    if (std::string e = FirstFailedEntry(reply_resp_.results(), "Step" + at); !e.empty()) {
      return absl::UnknownError(e);
    }
    if (reply_resp_.words_per_row() != apply_resp_.words_per_row()) {
      return absl::UnknownError("words_per_row differs between Step and StepInRegion");
    }
    mismatches_ += CheckAndPick({logits_.data, local_.data(), logits_.rows, logits_.vocab, pat_},
                                reply_resp_, eos, rng_, &next_);
    return absl::OkStatus();
  }

  uint64_t mismatches() const { return mismatches_; }
  const std::vector<double>& apply_us() const { return apply_us_; }
  const std::vector<double>& reply_us() const { return reply_us_; }

 private:
  absl::Status RunApply() {
    return TimeCall(&apply_us_, [&] { return shm_->StepInRegion(apply_req_, &apply_resp_); });
  }

  absl::Status RunReply() {
    return TimeCall(&reply_us_, [&] {
      absl::Status s = client_->Step(reply_req_, &reply_resp_);
      if (!s.ok()) return s;
      maskd::MaskBatch mask{reinterpret_cast<const uint32_t*>(reply_resp_.masks().data()),
                            static_cast<int64_t>(logits_.rows), reply_resp_.words_per_row(), 0};
      return applier_.Apply(local_batch_, mask);
    });
  }

  maskd::Client* client_;
  maskd::ShmClient* shm_;
  const DemoLogits logits_;
  const Pattern pat_;
  maskd::v1::StepInRegionRequest apply_req_;
  maskd::v1::StepInRegionResponse apply_resp_;
  maskd::v1::StepRequest reply_req_;
  maskd::v1::StepResponse reply_resp_;
  std::vector<uint8_t> local_;  // the reply path's logits
  maskd::CpuApplier applier_;
  maskd::LogitsBatch local_batch_;
  std::mt19937_64 rng_;
  std::vector<int64_t> next_;  // per row: the token to feed next, -1 none
  std::vector<double> apply_us_, reply_us_;
  uint64_t mismatches_ = 0;
};

int ShmDemo(const Context& ctx) {
  const char* kCmd = "shm-demo";
  auto compile_or = CompileRequestFromFlags(ctx.args);
  if (!compile_or.ok()) return Fail(kCmd, std::string(compile_or.status().message()));
  maskd::v1::CompileRequest compile = *std::move(compile_or);
  compile.set_wait(true);
  auto flags = ReadDemoFlags(ctx.args);
  if (!flags.ok()) return Fail(kCmd, std::string(flags.status().message()));

  auto client = OnlineConnect(ctx);
  if (!client.ok()) return Fail(kCmd, std::string(client.status().message()));
  maskd::Client& c = **client;
  maskd::ShmClient shm(c.channel());
  auto server_tokenizer = FindServerTokenizer(c, compile.tokenizer());
  if (!server_tokenizer.ok()) return Fail(kCmd, std::string(server_tokenizer.status().message()));
  const uint32_t vocab = server_tokenizer->vocab_size;
  const size_t rows = flags->rows;
  const std::string& key = flags->key;

  auto seg = maskd::shm::PosixShmSegment::Create(key, rows * vocab * PatternOf(flags->dtype).size);
  if (!seg.ok()) return Fail(kCmd, "creating " + key + ": " + seg.status().ToString());
  RegionCleanup cleanup{&shm, ""};
  const std::string region = "shm-demo-" + std::to_string(getpid());
  if (absl::Status s = shm.RegisterSystemRegion(region, key, 0, seg->size()); !s.ok()) {
    return Fail(kCmd, "RegisterSystemRegion: " + s.ToString());
  }
  cleanup.region = region;

  SessionSet sessions(&c);  // closed before the region is unregistered
  if (absl::Status s = sessions.Create(compile, 2 * rows); !s.ok()) return Fail(kCmd, s.ToString());
  DemoStepper stepper(&c, &shm, {region, seg->data(), flags->dtype, flags->proto_dtype, rows, vocab},
                      sessions.ids(), flags->seed);
  for (uint64_t step = 0; step < flags->steps; ++step) {
    if (absl::Status s = stepper.Step(step, server_tokenizer->eos_ids); !s.ok()) {
      return Fail(kCmd, std::string(s.message()));
    }
  }
  std::printf("{\"rows\": %zu, \"steps\": %llu, \"dtype\": \"%s\", \"mismatches\": %llu, "
              "\"apply_p50_us\": %.1f, \"reply_p50_us\": %.1f}\n",
              rows, static_cast<unsigned long long>(flags->steps), flags->dtype_name.c_str(),
              static_cast<unsigned long long>(stepper.mismatches()),
              Percentile(stepper.apply_us(), 0.5), Percentile(stepper.reply_us(), 0.5));
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
