// maskd_llama_sampler_test: the maskd llama.cpp sampler against a running
// maskd and a real GGUF model, through llama.cpp's own sampler chain.
//
//   maskd_llama_sampler_test MODEL.gguf ADDR [TOKENIZER]
//
// Checks here (exit 1 naming the first failure):
//   - MaskCandidates on hand-made arrays: unsorted, sorted and partial, ids
//     past the mask width, `selected` kept on its entry;
//   - accept / apply / clone (a fork continues alone) / reset (back to the
//     start) / an error (a disallowed token: status set, only EOS allowed);
//   - generation for a regex, a JSON Schema, a Lark and a GBNF grammar, each
//     with three chains (maskd -> temp -> dist; maskd -> greedy; top_k over
//     the whole vocabulary, which sorts it, -> maskd -> dist): no sampler
//     error, every token allowed, ended by EOS within the budget.
// Each generation is printed as one JSON line {"case", "kind", "constraint",
// "chain", "text", "tokens", "finished"} for test_llama_cpp.py, which checks
// the texts with independent matchers (regex, jsonschema, lark).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/llama_sampler/maskd_llama_sampler.h"
#include "llama.h"

namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

std::string Json(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

struct Case {
  const char* name;
  const char* kind;  // regex | json_schema | lark | gbnf
  const char* text;
};

const Case kCases[] = {
    {"phone", "regex", R"([0-9]{3}-[0-9]{4})"},
    {"words", "regex", R"((yes|no|maybe)( (yes|no|maybe)){0,3})"},
    {"person", "json_schema",
     R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},)"
     R"("age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],)"
     R"("additionalProperties":false})"},
    {"sum", "lark", "start: expr\nexpr: NUM (\"+\" NUM)*\nNUM: /[0-9]{1,3}/\n"},
    {"color", "gbnf", "root ::= \"color: \" (\"red\" | \"green\" | \"blue\") (\", \" [a-z]{1,5})?\n"},
};

maskd::v1::CompileRequest Compile(const std::string& tokenizer, const Case& c) {
  maskd::v1::CompileRequest r;
  r.set_tokenizer(tokenizer);
  std::string kind = c.kind;
  if (kind == "regex") {
    r.set_regex(c.text);
  } else if (kind == "json_schema") {
    r.set_json_schema(c.text);
  } else {
    r.mutable_grammar()->set_format(kind == "lark" ? maskd::v1::Grammar::FORMAT_LARK
                                                   : maskd::v1::Grammar::FORMAT_GBNF);
    r.mutable_grammar()->set_text(c.text);
  }
  return r;
}

// --- MaskCandidates on hand-made arrays -------------------------------------

void TestMaskCandidates() {
  // 64-token mask: ids 1, 5, 40 allowed.
  std::vector<uint32_t> row = {(1u << 1) | (1u << 5), 1u << (40 - 32)};
  std::vector<llama_token_data> d = {{5, 3.f, 0}, {7, 2.f, 0}, {40, 1.f, 0},
                                     {100, 0.5f, 0}, {1, 0.f, 0}, {-1, -1.f, 0}};
  llama_token_data_array a = {d.data(), d.size(), /*selected=*/-1, /*sorted=*/true};
  size_t masked = maskd::MaskCandidates(row, &a);
  Check(masked == 3, "MaskCandidates masks 7, 100 (past the width) and -1");
  Check(a.sorted, "a sorted array stays sorted");
  Check(d[0].id == 5 && d[1].id == 40 && d[2].id == 1, "allowed entries first, in order");
  for (size_t i = 1; i < d.size(); ++i) {
    Check(d[i - 1].logit >= d[i].logit, "still sorted by logit");
  }
  std::vector<llama_token_data> u = {{40, 0.f, 0}, {2, 9.f, 0}, {5, 1.f, 0}};
  llama_token_data_array b = {u.data(), u.size(), /*selected=*/2, /*sorted=*/false};
  maskd::MaskCandidates(row, &b);
  Check(u[0].id == 40 && u[1].id == 2 && std::isinf(u[1].logit) && u[2].logit == 1.f,
        "an unsorted array keeps its order; only disallowed logits change");
  Check(b.selected == 2, "selected unchanged");
  std::vector<llama_token_data> s = {{2, 9.f, 0}, {5, 1.f, 0}};
  llama_token_data_array c = {s.data(), s.size(), /*selected=*/1, /*sorted=*/true};
  maskd::MaskCandidates(row, &c);
  Check(c.selected == 0 && s[0].id == 5, "selected follows its entry when a sort moves it");
}

// --- the callbacks on a synthetic full-vocabulary array ---------------------

struct Full {
  std::vector<llama_token_data> data;
  explicit Full(int n) : data(n) {}
  // The allowed ids after `smpl` applies to all n ids, logits 0.
  std::vector<llama_token> Allowed(llama_sampler* smpl) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = {static_cast<llama_token>(i), 0.f, 0.f};
    llama_token_data_array a = {data.data(), data.size(), -1, false};
    llama_sampler_apply(smpl, &a);
    std::vector<llama_token> out;
    for (const auto& d : data) {
      if (d.logit == 0.f) out.push_back(d.id);
    }
    return out;
  }
};

void TestCallbacks(maskd::Client* client, const std::string& tokenizer, int n_vocab) {
  maskd::v1::CompileRequest r;
  r.set_tokenizer(tokenizer);
  r.set_regex("(ab|cd)[0-9]{2}");
  for (bool prefetch : {true, false}) {
    std::string tag = prefetch ? " (prefetch)" : " (no prefetch)";
    maskd::LlamaSamplerOptions opts;
    opts.prefetch = prefetch;
    auto made = maskd::NewLlamaSampler(client, r, opts);
    Check(made.ok(), "NewLlamaSampler: " + made.status().ToString());
    if (!made.ok()) return;
    llama_sampler* s = *made;
    Check(std::string(llama_sampler_name(s)) == "maskd", "name");
    Full full(n_vocab);
    std::vector<llama_token> start = full.Allowed(s);
    Check(!start.empty(), "the start allows tokens" + tag);
    // Take the lowest allowed token until the constraint ends, cloning after one.
    llama_sampler_accept(s, start.front());
    llama_sampler* fork = llama_sampler_clone(s);
    std::vector<llama_token> after_one = full.Allowed(s);
    Check(full.Allowed(fork) == after_one, "a clone has the same next mask" + tag);
    llama_sampler_accept(fork, after_one.back());  // the fork goes its own way
    Check(full.Allowed(s) == after_one, "advancing the clone leaves the original" + tag);
    llama_sampler_reset(s);
    Check(full.Allowed(s) == start, "reset goes back to the start" + tag);
    // An error: a token the start does not allow.
    llama_token bad = 0;
    while (std::find(start.begin(), start.end(), bad) != start.end()) ++bad;
    llama_sampler_accept(s, bad);
    std::vector<llama_token> after_bad = full.Allowed(s);
    absl::Status st = maskd::LlamaSamplerStatus(s);
    Check(st.code() == absl::StatusCode::kFailedPrecondition,
          "a disallowed token fails the sampler: " + st.ToString() + tag);
    Check(!after_bad.empty() && after_bad.size() <= 4, "after an error only EOS ids remain" + tag);
    llama_sampler_reset(s);
    Check(maskd::LlamaSamplerStatus(s).ok() && full.Allowed(s) == start, "reset clears the error");
    llama_sampler_free(fork);
    llama_sampler_free(s);
  }
}

// --- generation through a real model ---------------------------------------

struct Model {
  llama_model* model = nullptr;
  const llama_vocab* vocab = nullptr;
  std::vector<llama_token> prompt;
};

llama_sampler* Chain(const std::string& kind, llama_sampler* maskd_smpl, uint32_t seed) {
  llama_sampler* c = llama_sampler_chain_init(llama_sampler_chain_default_params());
  if (kind == "sorted") {
    // top_k over every id sorts the array: maskd then sees a sorted one.
    llama_sampler_chain_add(c, llama_sampler_init_top_k(1 << 30));
  }
  llama_sampler_chain_add(c, maskd_smpl);
  if (kind == "greedy") {
    llama_sampler_chain_add(c, llama_sampler_init_greedy());
  } else {
    llama_sampler_chain_add(c, llama_sampler_init_temp(0.9f));
    llama_sampler_chain_add(c, llama_sampler_init_dist(seed));
  }
  return c;
}

void Generate(maskd::Client* client, const std::string& tokenizer, Model& m, const Case& c,
              const std::string& chain_kind, uint32_t seed) {
  const int kMaxTokens = 48;
  maskd::LlamaSamplerOptions opts;
  opts.max_tokens = kMaxTokens;
  auto made = maskd::NewLlamaSampler(client, Compile(tokenizer, c), opts);
  std::string tag = absl::StrCat(c.name, "/", chain_kind);
  Check(made.ok(), tag + ": NewLlamaSampler: " + made.status().ToString());
  if (!made.ok()) return;
  llama_sampler* chain = Chain(chain_kind, *made, seed);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = 256;
  cp.n_threads = cp.n_threads_batch = 1;
  llama_context* ctx = llama_init_from_model(m.model, cp);
  std::vector<llama_token> prompt = m.prompt;
  llama_batch batch = llama_batch_get_one(prompt.data(), prompt.size());
  std::string text;
  std::vector<llama_token> tokens;
  bool finished = false;
  llama_token tok;
  for (int i = 0; i < kMaxTokens; ++i) {
    if (llama_decode(ctx, batch) != 0) {
      Check(false, tag + ": llama_decode");
      break;
    }
    tok = llama_sampler_sample(chain, ctx, -1);
    if (llama_vocab_is_eog(m.vocab, tok)) {
      finished = true;
      break;
    }
    tokens.push_back(tok);
    char buf[256];
    int len = llama_token_to_piece(m.vocab, tok, buf, sizeof buf, 0, /*special=*/true);
    if (len > 0) text.append(buf, len);
    batch = llama_batch_get_one(&tok, 1);
  }
  absl::Status st = maskd::LlamaSamplerStatus(chain);
  Check(st.ok(), tag + ": sampler status " + st.ToString());
  Check(finished, tag + ": ended by EOS within the budget");
  std::string ids;
  for (llama_token t : tokens) absl::StrAppend(&ids, ids.empty() ? "" : ",", t);
  std::printf("{\"case\":%s,\"kind\":%s,\"constraint\":%s,\"chain\":%s,\"text\":%s,"
              "\"tokens\":[%s],\"finished\":%s}\n",
              Json(c.name).c_str(), Json(c.kind).c_str(), Json(c.text).c_str(),
              Json(chain_kind).c_str(), Json(text).c_str(), ids.c_str(),
              finished ? "true" : "false");
  std::fflush(stdout);
  llama_sampler_free(chain);
  llama_free(ctx);
}

void Quiet(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf ADDR [TOKENIZER]\n", argv[0]);
    return 2;
  }
  std::string tokenizer = argc > 3 ? argv[3] : "qwen3";
  TestMaskCandidates();
  auto client = maskd::Client::Connect(argv[2]);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  llama_log_set(Quiet, nullptr);
  llama_backend_init();
  Model m;
  m.model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (m.model == nullptr) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  m.vocab = llama_model_get_vocab(m.model);
  const std::string prompt = "Answer in the requested format:";
  m.prompt.resize(prompt.size() + 8);
  int n = llama_tokenize(m.vocab, prompt.data(), prompt.size(), m.prompt.data(),
                         m.prompt.size(), true, true);
  m.prompt.resize(n > 0 ? n : 0);
  TestCallbacks(client->get(), tokenizer, llama_vocab_n_tokens(m.vocab));
  uint32_t seed = 1;
  for (const Case& c : kCases) {
    for (const char* chain : {"dist", "greedy", "sorted"}) {
      Generate(client->get(), tokenizer, m, c, chain, seed++);
    }
  }
  llama_model_free(m.model);
  if (failures > 0) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::fprintf(stderr, "maskd_llama_sampler_test: all checks passed\n");
  return 0;
}
