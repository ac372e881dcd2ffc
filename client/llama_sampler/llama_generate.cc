// maskd_llama_generate: load a GGUF model, constrain it with maskd, generate.
//
//   maskd_llama_generate --model M.gguf --maskd unix:///tmp/maskd.sock --tokenizer qwen3
//       (--regex R | --json-schema FILE | --lark FILE | --gbnf FILE)
//       [--prompt TEXT] [--max-tokens N] [--seed S] [--temp T]
//       [--backend maskd|llama-grammar|none] [--threads N (default 1)]
//
// The chain is maskd -> temperature -> dist (or greedy with --temp 0). Prints
// the generated text on stdout, and on stderr the steps and their mean time
// after the first (which includes the prompt). --backend llama-grammar puts
// llama.cpp's own grammar sampler in maskd's place (GBNF only), none no
// constraint: the comparisons. Exits 1 when generation or maskd failed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/llama_sampler/maskd_llama_sampler.h"
#include "llama.h"

namespace {

struct Args {
  std::string model, maskd, tokenizer = "qwen3", prompt = "Answer in the requested format:";
  std::string kind, constraint, backend = "maskd";
  int max_tokens = 64;
  int threads = 1;  // more only on an idle machine: ggml's workers spin
  uint32_t seed = 0;
  float temp = 0.8f;
};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") a->model = v;
    else if (k == "--maskd") a->maskd = v;
    else if (k == "--tokenizer") a->tokenizer = v;
    else if (k == "--prompt") a->prompt = v;
    else if (k == "--max-tokens") a->max_tokens = std::atoi(v.c_str());
    else if (k == "--threads") a->threads = std::atoi(v.c_str());
    else if (k == "--seed") a->seed = static_cast<uint32_t>(std::atoll(v.c_str()));
    else if (k == "--temp") a->temp = std::strtof(v.c_str(), nullptr);
    else if (k == "--backend") a->backend = v;
    else if (k == "--regex") a->kind = "regex", a->constraint = v;
    else if (k == "--json-schema" || k == "--lark" || k == "--gbnf") {
      a->kind = k.substr(2), a->constraint = ReadFile(v);
    } else {
      return false;
    }
  }
  bool known = a->backend == "maskd" || a->backend == "none" ||
               (a->backend == "llama-grammar" && a->kind == "gbnf");
  return argc % 2 == 1 && known && !a->model.empty() && !a->maskd.empty() && !a->kind.empty();
}

// llama.cpp's log: errors only.
void Quiet(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

maskd::v1::CompileRequest Compile(const Args& a) {
  maskd::v1::CompileRequest c;
  c.set_tokenizer(a.tokenizer);
  if (a.kind == "regex") {
    c.set_regex(a.constraint);
  } else if (a.kind == "json-schema") {
    c.set_json_schema(a.constraint);
  } else {
    c.mutable_grammar()->set_format(a.kind == "lark" ? maskd::v1::Grammar::FORMAT_LARK
                                                     : maskd::v1::Grammar::FORMAT_GBNF);
    c.mutable_grammar()->set_text(a.constraint);
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: %s --model M.gguf --maskd ADDR [--tokenizer NAME] (--regex R | "
                 "--json-schema FILE | --lark FILE | --gbnf FILE) [--prompt TEXT] "
                 "[--max-tokens N] [--seed S] [--temp T] [--backend maskd|none|"
                 "llama-grammar (GBNF only)] [--threads N]\n",
                 argv[0]);
    return 2;
  }
  auto client = maskd::Client::Connect(a.maskd);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  llama_log_set(Quiet, nullptr);
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(a.model.c_str(), llama_model_default_params());
  if (model == nullptr) {
    std::fprintf(stderr, "cannot load %s\n", a.model.c_str());
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> prompt(a.prompt.size() + 8);
  int n = llama_tokenize(vocab, a.prompt.data(), a.prompt.size(), prompt.data(), prompt.size(),
                         /*add_special=*/true, /*parse_special=*/true);
  prompt.resize(n < 0 ? 0 : n);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = prompt.size() + a.max_tokens + 1;
  cp.n_batch = cp.n_ctx;
  cp.n_threads = cp.n_threads_batch = a.threads;
  llama_context* ctx = llama_init_from_model(model, cp);

  maskd::LlamaSamplerOptions opts;
  opts.max_tokens = a.max_tokens;
  llama_sampler* chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  if (a.backend == "maskd") {
    auto maskd_smpl = maskd::NewLlamaSampler(client->get(), Compile(a), opts);
    if (!maskd_smpl.ok()) {
      std::fprintf(stderr, "%s\n", maskd_smpl.status().ToString().c_str());
      return 1;
    }
    llama_sampler_chain_add(chain, *maskd_smpl);
  } else if (a.backend == "llama-grammar") {
    llama_sampler* g = llama_sampler_init_grammar(vocab, a.constraint.c_str(), "root");
    if (g == nullptr) {
      std::fprintf(stderr, "llama.cpp did not parse the grammar\n");
      return 1;
    }
    llama_sampler_chain_add(chain, g);
  }
  if (a.temp <= 0) {
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
  } else {
    llama_sampler_chain_add(chain, llama_sampler_init_temp(a.temp));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(a.seed));
  }

  llama_batch batch = llama_batch_get_one(prompt.data(), prompt.size());
  std::string text;
  llama_token tok;
  double later_ms = 0;  // steps after the first
  int steps = 0;
  for (int i = 0; i < a.max_tokens; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (llama_decode(ctx, batch) != 0) break;
    tok = llama_sampler_sample(chain, ctx, -1);
    ++steps;
    if (i > 0) {
      later_ms += std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - t0).count();
    }
    if (a.backend != "none" && llama_vocab_is_eog(vocab, tok)) break;
    char buf[256];
    int len = llama_token_to_piece(vocab, tok, buf, sizeof buf, 0, /*special=*/false);
    if (len > 0) text.append(buf, len);
    batch = llama_batch_get_one(&tok, 1);
  }
  absl::Status st = a.backend == "maskd" ? maskd::LlamaSamplerStatus(chain) : absl::OkStatus();
  std::printf("%s\n", text.c_str());
  std::fprintf(stderr, "backend %s: %d steps, %.3f ms/step after the first\n",
               a.backend.c_str(), steps, steps > 1 ? later_ms / (steps - 1) : 0.0);
  llama_sampler_free(chain);
  llama_free(ctx);
  llama_model_free(model);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
