// maskctl vocab: loads a tokenizer the way maskd does (the vocabulary and its
// TokenizerContext: trie and loop-mask byte index) and prints a summary,
// or with --dump every token's bytes. Output contract (scripts depend on it):
//   summary: {"tokens": N, "vocab_size": N, "eos": [ids], "special": N,
//             "kind": "byte_level"|"sentencepiece", "sha256": "<hex>",
//             "load_ms": <float>}
//   --dump:  one line per id that has a token, in id order:
//            {"id": 123, "hex": "<lowercase hex of its bytes>", "special": false}
// Errors: one line on stderr, exit status 2.
#include <chrono>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"
#include "tools/maskctl/args.h"
#include "tools/maskctl/command.h"
#include "tools/maskctl/tokenizer_flag.h"

namespace maskctl {
namespace {

constexpr size_t kFlushBytes = 1 << 20;

bool Write(const std::string& s) {
  return s.empty() || std::fwrite(s.data(), 1, s.size(), stdout) == s.size();
}

std::string Summary(const maskd::Vocabulary& v, double load_ms) {
  std::string eos;
  for (uint32_t id : v.eos_ids()) absl::StrAppend(&eos, eos.empty() ? "" : ", ", id);
  return absl::StrFormat(
      "{\"tokens\": %u, \"vocab_size\": %u, \"eos\": [%s], \"special\": %u, \"kind\": \"%s\", "
      "\"sha256\": \"%s\", \"load_ms\": %.3f}\n",
      v.num_tokens(), v.size(), eos, v.num_special(),
      std::string(maskd::TokenizerKindName(v.kind())), v.content_hash(), load_ms);
}

bool Dump(const maskd::Vocabulary& v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(kFlushBytes + 4096);
  for (uint32_t id = 0; id < v.size(); ++id) {
    if (!v.has_token(id)) continue;
    absl::StrAppend(&out, "{\"id\": ", id, ", \"hex\": \"");
    for (unsigned char c : v.bytes(id)) {
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
    out.append(v.is_special(id) ? "\", \"special\": true}\n" : "\", \"special\": false}\n");
    if (out.size() >= kFlushBytes) {
      if (!Write(out)) return false;
      out.clear();
    }
  }
  return Write(out);
}

int RunVocab(const Context& ctx) {
  const Args* args = &ctx.args;
  if (!args->positional().empty()) {
    return Fail("vocab", "unexpected argument '" + args->positional()[0] + "'");
  }
  const auto start = std::chrono::steady_clock::now();
  auto context = LoadTokenizerContextFlag(*args);
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!context.ok()) return Fail("vocab", std::string(context.status().message()));
  const maskd::Vocabulary& vocab = (*context)->vocabulary();
  bool ok = args->Has("dump") ? Dump(vocab) : Write(Summary(vocab, load_ms));
  if (!ok || std::fflush(stdout) != 0) return Fail("vocab", "error writing to stdout");
  return 0;
}

}  // namespace

MASKCTL_COMMAND(vocab, "vocab",
                "loads a tokenizer as maskd does: a summary, or with --dump every token's bytes",
                Form{"vocab --tokenizer PATH [--vocab-size N] [--eos ID[,ID...]] [--dump]",
                     TokenizerValueFlags(), {"dump"}},
                Form{}, RunVocab);

}  // namespace maskctl
