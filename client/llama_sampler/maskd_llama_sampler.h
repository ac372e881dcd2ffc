// maskd::NewLlamaSampler: a llama.cpp sampler (llama_sampler_i) that constrains
// generation with any maskd constraint (regex, JSON Schema, Lark, GBNF,
// structural tag), through the C++ client (client/client.h).
//
// Add it to a sampler chain before the samplers that pick a token:
//
//   auto client = maskd::Client::Connect("unix:///tmp/maskd.sock").value();
//   maskd::v1::CompileRequest compile;
//   compile.set_tokenizer("qwen3");
//   compile.set_json_schema(schema_text);
//   llama_sampler* chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
//   llama_sampler_chain_add(chain, maskd::NewLlamaSampler(client.get(), compile).value());
//   llama_sampler_chain_add(chain, llama_sampler_init_top_k(40));
//   llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
//   ... llama_sampler_sample(chain, ctx, -1) each step; EOS ends it.
//
// What each callback does:
//   apply   sets the logit of every candidate the session's next mask does
//           not allow to -INFINITY. The candidates may be any subset of ids in
//           any order; ids past the mask width are disallowed. A sorted array
//           stays sorted (masked entries move to its end, order kept).
//   accept  queues the sampled token; the maskd Step that sends it starts at
//           once on another thread (Options::prefetch), so the round trip
//           overlaps the next llama_decode, and the next apply collects it.
//   reset   starts over at the constraint's start (a new session).
//   clone   forks the session (ForkSession): the clone continues alone.
//   free    closes the session.
// llama_sampler_i cannot return errors: the first one (a token the
// constraint does not allow, maskd unreachable, ...) is kept, readable with
// LlamaSamplerStatus, and from then on apply allows only the EOS ids, so that
// generation ends. reset clears it.
//
// One sampler serves one sequence; it is used from one thread at a time (as
// llama.cpp does). The Client is shared and must outlive the sampler and its
// clones. Token ids are the model's: the maskd tokenizer must be the model's
// (same ids), as for every maskd engine adapter.
#ifndef MASKD_CLIENT_LLAMA_SAMPLER_MASKD_LLAMA_SAMPLER_H_
#define MASKD_CLIENT_LLAMA_SAMPLER_MASKD_LLAMA_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/client.h"
#include "llama.h"

namespace maskd {

struct LlamaSamplerOptions {
  // Budget mode: the generation's maximum new tokens (the EOS included), sent
  // as StepEntry.max_tokens_left, so that maskd masks tokens after which the
  // constraint could no longer end within it. 0: no budget.
  uint32_t max_tokens = 0;
  // Ids allowed after an error (so that generation ends); empty: the maskd
  // tokenizer's EOS ids.
  std::vector<llama_token> eos_ids;
  // Send the Step of a sampled token from accept, on another thread (true),
  // or wait for it in the next apply (false).
  bool prefetch = true;
};

// Compiles `compile` (waiting for the index) and returns a sampler at the
// constraint's start. The caller owns it until it is added to a chain
// (llama_sampler_chain_add), then the chain does. Fails when the constraint
// does not compile or maskd is unreachable.
absl::StatusOr<llama_sampler*> NewLlamaSampler(Client* client,
                                               const v1::CompileRequest& compile,
                                               const LlamaSamplerOptions& options = {});

// Whether `smpl` is a maskd sampler.
bool IsMaskdLlamaSampler(const llama_sampler* smpl);

// The first error a maskd sampler met since it was made or reset: `smpl`
// itself, or the first maskd sampler in the chain `smpl`. NOT_FOUND when
// there is none.
absl::Status LlamaSamplerStatus(const llama_sampler* smpl);

// Sets the logit of each candidate not allowed by `row` (a maskd mask row)
// to -INFINITY, keeping a sorted array sorted. Returns how many it masked.
size_t MaskCandidates(absl::Span<const uint32_t> row, llama_token_data_array* cur_p);

}  // namespace maskd

#endif  // MASKD_CLIENT_LLAMA_SAMPLER_MASKD_LLAMA_SAMPLER_H_
