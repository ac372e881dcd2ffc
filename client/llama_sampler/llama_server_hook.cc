// maskd as the grammar sampler of llama.cpp's common_sampler, and so of
// llama-server: the definition of common_grammar_sampler_override, the hook
// that client/llama_sampler/llama_server.patch adds to llama.cpp's
// common/sampling.{h,cpp} (weak there; this strong definition wins when this
// object is linked into the program, as MASKD_LLAMA_SERVER does for
// llama-server).
//
// Settings (environment, read once):
//   MASKD_LLAMA_ADDR       maskd's address; unset or empty: llama.cpp's own
//                          grammar sampler serves every request, unchanged.
//   MASKD_LLAMA_TOKENIZER  the name of the model's tokenizer on that server
//                          (default "qwen3"); its ids must be the model's.
//
// Which requests maskd serves: those with a grammar that is neither lazy nor
// fed a generation prompt, i.e. /completion's "grammar" (GBNF) and
// "json_schema" fields (the schema turned into GBNF by llama-server's own
// converter); the request's n_predict (params.n_predict_budget, from the
// patch) is maskd's budget, so the output closes within it. What stays with
// llama.cpp: lazy grammars (tool calls, triggered by words the model emits),
// the chat templates' grammars (chat completions' response_format), which
// llama.cpp feeds the template's generation prompt first, and "%llguidance"
// grammars. A grammar maskd refuses fails its request
// with maskd's message, as llama.cpp's own parse error does.
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/llama_sampler/maskd_llama_sampler.h"
#include "common.h"
#include "sampling.h"

namespace maskd {
namespace {

struct ServerHookConfig {
  std::string addr;       // empty: the hook is off
  std::string tokenizer;  // maskd's name for the model's tokenizer
};

const ServerHookConfig& Config() {
  static const ServerHookConfig config = [] {
    ServerHookConfig c;
    const char* addr = std::getenv("MASKD_LLAMA_ADDR");
    const char* tok = std::getenv("MASKD_LLAMA_TOKENIZER");
    c.addr = addr != nullptr ? addr : "";
    c.tokenizer = tok != nullptr && *tok != '\0' ? tok : "qwen3";
    return c;
  }();
  return config;
}

// The process's one client, connected on first use and kept for the
// process's life (samplers and their clones borrow it). Its tokenizer is
// checked against the model's vocabulary once.
absl::StatusOr<Client*> SharedClient(const llama_vocab* vocab) {
  static std::mutex mu;
  static std::unique_ptr<Client> client;
  std::lock_guard<std::mutex> lock(mu);
  if (client != nullptr) return client.get();
  ClientOptions options;
  options.client_name = "llama.cpp";
  absl::StatusOr<std::unique_ptr<Client>> connected = Client::Connect(Config().addr, options);
  if (!connected.ok()) return connected.status();
  absl::StatusOr<std::vector<v1::Tokenizer>> tokenizers = (*connected)->ListTokenizers();
  if (!tokenizers.ok()) return tokenizers.status();
  const int32_t model_ids = llama_vocab_n_tokens(vocab);
  for (const v1::Tokenizer& t : *tokenizers) {
    if (t.name() != Config().tokenizer) continue;
    if (t.vocab_size() > static_cast<uint32_t>(model_ids)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "maskd tokenizer '", t.name(), "' is ", t.vocab_size(), " ids wide, the model has ",
          model_ids, ": MASKD_LLAMA_TOKENIZER must name the model's tokenizer"));
    }
    client = *std::move(connected);
    return client.get();
  }
  return absl::NotFoundError(absl::StrCat("maskd at ", Config().addr, " has no tokenizer '",
                                          Config().tokenizer, "' (MASKD_LLAMA_TOKENIZER)"));
}

}  // namespace
}  // namespace maskd

llama_sampler* common_grammar_sampler_override(const llama_vocab* vocab,
                                               const common_params_sampling& params) {
  const std::string& grammar = common_grammar_value(params.grammar);
  // A grammar llama.cpp feeds the template's generation prompt (prefill) is
  // left to it: those are special tokens (<|im_start|>...), which maskd does
  // not match as text.
  const bool prefilled =
      common_grammar_needs_prefill(params.grammar) && !params.generation_prompt.empty();
  if (maskd::Config().addr.empty() || grammar.empty() || params.grammar_lazy || prefilled ||
      grammar.rfind("%llguidance", 0) == 0) {
    return nullptr;
  }
  absl::StatusOr<maskd::Client*> client = maskd::SharedClient(vocab);
  if (!client.ok()) throw std::runtime_error("maskd: " + client.status().ToString());
  maskd::v1::CompileRequest compile;
  compile.set_tokenizer(maskd::Config().tokenizer);
  compile.mutable_grammar()->set_format(maskd::v1::Grammar::FORMAT_GBNF);
  compile.mutable_grammar()->set_text(grammar);
  maskd::LlamaSamplerOptions options;
  if (params.n_predict_budget > 0) options.max_tokens = static_cast<uint32_t>(params.n_predict_budget);
  absl::StatusOr<llama_sampler*> sampler = maskd::NewLlamaSampler(*client, compile, options);
  if (!sampler.ok()) throw std::runtime_error("maskd: " + sampler.status().ToString());
  return *sampler;
}
